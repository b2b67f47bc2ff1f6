#!/usr/bin/env python3
"""Checks the DOM of a report.html as headless Chromium printed it (tests/common/report/report_test.sh).

    report_dom_check.py DOM_FILE STEPS VALIDATIONS RANKS

Fails naming what differs: the loss and throughput charts have a point per step, the validation
chart one per validation, the two per-rank charts a line of STEPS points per rank, the page one
generation line of a finished run and a summary.
"""
import sys
from html.parser import HTMLParser


class Report(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svg = None
        self.points = {}      # svg id -> circles of class point
        self.series = {}      # svg id -> [(label, data-points)]
        self.text_of = None   # id or class whose text is being collected
        self.texts = {"summary": "", "generation": []}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg = a.get("id")
            self.points.setdefault(self.svg, 0)
            self.series.setdefault(self.svg, [])
        elif tag == "circle" and a.get("class") == "point" and self.svg:
            self.points[self.svg] += 1
        elif tag == "g" and a.get("class") == "series" and self.svg:
            self.series[self.svg].append((a.get("data-label"), int(a.get("data-points", "-1"))))
        elif tag == "p" and a.get("id") == "summary":
            self.text_of = "summary"
        elif tag == "li" and a.get("class") == "generation":
            self.text_of = "generation"
            self.texts["generation"].append("")

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None
        elif tag in ("p", "li"):
            self.text_of = None

    def handle_data(self, data):
        if self.text_of == "summary":
            self.texts["summary"] += data
        elif self.text_of == "generation":
            self.texts["generation"][-1] += data


def main():
    dom_file, steps, validations, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    report = Report()
    with open(dom_file, encoding="utf-8") as f:
        report.feed(f.read())
    errors = []

    def expect(what, got, want):
        if got != want:
            errors.append(f"{what}: {got!r}, expected {want!r}")

    expect("points of #loss-chart", report.points.get("loss-chart"), steps)
    expect("points of #throughput-chart", report.points.get("throughput-chart"), steps)
    expect("points of #val-loss-chart", report.points.get("val-loss-chart"), validations)
    for chart in ("rank-step-chart", "rank-compute-chart"):
        expect(f"lines of #{chart}", report.series.get(chart), [(f"rank {r}", steps) for r in range(ranks)])
    generations = report.texts["generation"]
    expect("generation lines", len(generations), 1)
    if generations and not (generations[0].startswith(f"generation 0 (start): {ranks} ranks, steps 1-{steps}")
                            and generations[0].endswith("finished")):
        errors.append(f"generation line: {generations[0]!r}")
    if "finished." not in report.texts["summary"]:
        errors.append(f"summary: {report.texts['summary']!r} does not say the run finished")
    for e in errors:
        print(f"{dom_file}: {e}", file=sys.stderr)
    if not errors:
        print(f"{dom_file}: {steps} loss points, {validations} validation points, {ranks} rank lines, "
              f"summary: {report.texts['summary']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
