#!/usr/bin/env python3
"""Counts the results in CTest's JUnit file (ctest --output-junit FILE) and prints

    tests: N passed, M skipped, K failed

after one line per skipped test with the reason it printed (tests/support/skip.h). A test is
skipped only when its output matched SKIP_REGULAR_EXPRESSION; one that did not run for another
reason (a failed fixture, a missing file) counts as failed, as CTest's exit status does.
Usage: scripts/test-summary.py JUNIT_FILE
"""
import sys
import xml.etree.ElementTree as ET

SKIP_TOKEN = "DSLAUNCH_TEST_SKIPPED:"


def main(path):
    passed, skipped, failed = 0, [], []
    for case in ET.parse(path).getroot().iter("testcase"):
        name, status = case.get("name"), case.get("status")
        if status == "run":
            passed += 1
            continue
        marker = case.find("skipped")
        if status == "notrun" and marker is not None and marker.get("message") == "SKIP_REGULAR_EXPRESSION_MATCHED":
            out = case.findtext("system-out") or ""
            reason = next((line.split(SKIP_TOKEN, 1)[1].strip() for line in out.splitlines() if SKIP_TOKEN in line), "")
            skipped.append((name, reason))
        else:
            why = marker.get("message") if marker is not None else status
            failed.append((name, why))
    for name, reason in skipped:
        print(f"skipped: {name}: {reason}")
    for name, why in failed:
        print(f"failed: {name} ({why})")
    print(f"tests: {passed} passed, {len(skipped)} skipped, {len(failed)} failed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
