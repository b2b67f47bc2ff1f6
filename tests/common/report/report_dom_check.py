#!/usr/bin/env python3
"""Checks the DOM of a report.html as headless Chromium printed it (tests/common/report/report_test.sh).

    report_dom_check.py DOM_FILE STEPS VALIDATIONS RANKS

Fails naming what differs: the loss, throughput, learning-rate, gradient-norm and loss-scale
charts have a point per step, the validation chart one per validation, the two per-rank charts a
line of STEPS points per rank, the page one generation line of a finished run, a summary, the wall
time, and the command line and config the run recorded.
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
        self.texts = {"summary": "", "generation": [], "wall-time": "", "command": "", "config": ""}

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
        elif tag in ("p", "pre") and a.get("id") in ("wall-time", "command", "config"):
            self.text_of = a.get("id")
        elif tag == "li" and a.get("class") == "generation":
            self.text_of = "generation"
            self.texts["generation"].append("")

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None
        elif tag in ("p", "li", "pre"):
            self.text_of = None

    def handle_data(self, data):
        if self.text_of in ("summary", "wall-time", "command", "config"):
            self.texts[self.text_of] += data
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
    for chart in ("lr-chart", "grad-norm-chart", "loss-scale-chart"):
        expect(f"points of #{chart}", report.points.get(chart), steps)
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
    wall = report.texts["wall-time"]
    if not (wall.startswith("Wall time: ") and wall.endswith(" s, from the first run's start to the last exit recorded.")):
        errors.append(f"wall time: {wall!r}")
    command = report.texts["command"].split(" ")
    if len(command) != 3 or not command[0].endswith("dslaunch-worker") or command[1] != "train" \
            or not command[2].endswith("train.json"):
        errors.append(f"command: {report.texts['command']!r}, expected 'PATH/dslaunch-worker train PATH/train.json'")
    if '"train_batch_size": 32' not in report.texts["config"]:
        errors.append(f"config: {report.texts['config']!r} does not hold the train.json")
    for e in errors:
        print(f"{dom_file}: {e}", file=sys.stderr)
    if not errors:
        print(f"{dom_file}: {steps} loss points, {validations} validation points, {ranks} rank lines, "
              f"summary: {report.texts['summary']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
