#!/usr/bin/env bash
# Mutation testing (docs/testing.md, "Mutation testing"): applies each small bug of a list to a
# scratch copy of the tree, builds the test targets the line names, runs them, and reports which
# mutations survive (every named test still passes). Exit status: 0 when every mutation was
# caught, 1 when one survived, 2 for a bad list or command line, 3 when a line is broken (its
# pattern is not in the file exactly once, its mutant does not compile) or the unmutated tests fail.
#
#   scripts/mutate.sh                   every line of tests/mutations.txt
#   scripts/mutate.sh --line 42         only the mutation on line 42 of the list
#   scripts/mutate.sh --match hostfile  only the lines containing 'hostfile'
#   scripts/mutate.sh --check           only check that every pattern occurs once (no build)
#   scripts/mutate.sh --list FILE       another list
#
# List format, one mutation per line, fields separated by one TAB ('#' starts a comment line):
#   FILE  PATTERN  REPLACEMENT  TARGETS  [DOCTEST ARGS]
# PATTERN is literal text that must occur exactly once in FILE (a path from the repository root);
# REPLACEMENT may be empty (the text is deleted). TARGETS are test executables (names of
# tests/CMakeLists.txt), separated by spaces; DOCTEST ARGS are passed to each, e.g.
# -tc=*ZeRO*,*checkpoint* to run only some cases.
#
# The scratch copy lives in $DSLAUNCH_MUTATE_DIR (default /tmp/dslaunch-mutate): src/ is synced
# from the working tree (tracked and untracked, not ignored, files; unchanged files keep their
# times), build/ is configured once with Ninja and ccache, so each mutant rebuilds only what the
# mutated file touches and restoring it is a cache hit. Builds use -j${DSLAUNCH_MUTATE_JOBS:-2};
# each test run is limited to ${DSLAUNCH_MUTATE_TIMEOUT:-600} s (a mutant that hangs is caught).
#
#   scripts/mutate.sh --reuse-build build   start from the working tree's own build directory
#
# With --reuse-build DIR the scratch copy is tree/: the first run copies the whole working tree
# with DIR (objects, programs, CMake's absolute paths) there, and every run mutates it in a
# private mount namespace (unshare -m, root) where tree/ is bind-mounted over the working tree's
# path, so that DIR's absolute paths name the copy. Nothing but what changed since DIR was built is
# compiled before the first mutant; the working tree itself is never touched.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec python3 - "$root" "$@" <<'PY'
import argparse
import fcntl
import re
import shlex
import os
import shutil
import subprocess
import sys
import time

root = sys.argv[1]
parser = argparse.ArgumentParser(prog="scripts/mutate.sh", description="Mutation testing (docs/testing.md).")
parser.add_argument("--list", help="the list (default: tests/mutations.txt of the working tree)")
parser.add_argument("--line", type=int, help="run only the mutation on this line of the list")
parser.add_argument("--match", help="run only the lines that contain this text")
parser.add_argument("--check", action="store_true", help="only check that every pattern occurs exactly once")
parser.add_argument("--reuse-build", metavar="DIR",
                    help="start from the working tree's build directory DIR (a copy of both, mutated under unshare -m)")
parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)  # the re-run in the namespace
args = parser.parse_args(sys.argv[2:])

work = os.environ.get("DSLAUNCH_MUTATE_DIR", "/tmp/dslaunch-mutate")
jobs = os.environ.get("DSLAUNCH_MUTATE_JOBS", "2")
timeout = int(os.environ.get("DSLAUNCH_MUTATE_TIMEOUT", "600"))
logs = os.path.join(work, "logs")
if args.reuse_build:
    # Inside the namespace the working tree's path holds the copy: src and build are its own, and
    # the working tree is seen at work/real.
    src, build = root, os.path.join(root, args.reuse_build)
else:
    src, build = os.path.join(work, "src"), os.path.join(work, "build")
sync_from = os.path.join(work, "real") if args.inside else root
# Inside the namespace the working tree's path names the copy, which is synced only later.
args.list = args.list or os.path.join(sync_from, "tests", "mutations.txt")


class Mutation:
    def __init__(self, number, fields):
        self.line = number
        self.file, self.pattern, self.replacement = fields[0], fields[1], fields[2]
        self.targets = fields[3].split()
        # Shell-like words, so that a quoted filter may hold spaces: -tc='*no descriptor*'.
        self.doctest_args = shlex.split(fields[4]) if len(fields) > 4 and fields[4] else []

    def describe(self):
        return f"line {self.line}: {self.file}: '{self.pattern}' -> '{self.replacement}'"


def read_list(path):
    mutations = []
    with open(path) as f:
        for number, text in enumerate(f, start=1):
            text = text.rstrip("\n")
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            fields = text.split("\t")
            if len(fields) not in (4, 5) or not fields[0] or not fields[1] or not fields[3].strip():
                sys.exit(f"{path}:{number}: expected FILE<TAB>PATTERN<TAB>REPLACEMENT<TAB>TARGETS[<TAB>DOCTEST ARGS], "
                         f"got {len(fields)} field(s)")
            mutations.append(Mutation(number, fields))
    return mutations


def occurrences(tree, m):
    path = os.path.join(tree, m.file)
    if not os.path.isfile(path):
        return -1
    with open(path) as f:
        return f.read().count(m.pattern)


def sync_tree():
    """Copies the working tree's files into src/, only those that differ. A copied file gets the
    current time, not its source's: the source may be older than the scratch build's object made
    from the previous version, and Ninja would then keep that stale object."""
    listed = subprocess.run(["git", "-C", sync_from, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout.decode().split("\0")
    copied = 0
    for rel in filter(None, listed):
        here, there = os.path.join(sync_from, rel), os.path.join(src, rel)
        if not os.path.isfile(here) or os.path.islink(here):
            continue
        if os.path.isfile(there):
            with open(here, "rb") as a, open(there, "rb") as b:
                if a.read() == b.read():
                    continue
        os.makedirs(os.path.dirname(there), exist_ok=True)
        shutil.copyfile(here, there)
        shutil.copymode(here, there)
        copied += 1
    return copied


def run(cmd, log, limit=None):
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        try:
            return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=limit, cwd=work).returncode
        except subprocess.TimeoutExpired:
            out.write(f"timed out after {limit} s\n")
            return 124


def build_targets(targets, log):
    return run(["ninja", "-C", build, f"-j{jobs}"] + sorted(set(targets)), log) == 0


def tests_pass(m, log):
    """True when every target's tests pass (the mutant survives)."""
    for t in m.targets:
        if run([os.path.join(build, "tests", t)] + m.doctest_args, log, timeout) != 0:
            return False
    return True


mutations = read_list(args.list)
if args.line is not None:
    mutations = [m for m in mutations if m.line == args.line]
if args.match:
    mutations = [m for m in mutations if args.match in "\t".join([m.file, m.pattern, m.replacement] + m.targets)]
if not mutations:
    sys.exit(f"{args.list}: no mutation selected")

broken = [m for m in mutations if occurrences(sync_from, m) != 1]
for m in broken:
    n = occurrences(sync_from, m)
    print(f"BROKEN {m.describe()}: " + ("no such file" if n < 0 else f"the pattern occurs {n} times, not once"))
if args.check:
    print(f"{len(mutations) - len(broken)} of {len(mutations)} patterns occur exactly once")
    sys.exit(3 if broken else 0)
if broken:
    sys.exit(3)

start = time.monotonic()
if args.reuse_build and not args.inside:
    # Outside: make or refresh the copy, then run this script again where it stands in for the
    # working tree. The copy's files are synced inside (sync_tree), from the real tree bound at
    # work/real, since the working tree's own path then names the copy.
    if not os.path.isfile(os.path.join(root, args.reuse_build, "build.ninja")):
        sys.exit(f"--reuse-build {args.reuse_build}: {os.path.join(root, args.reuse_build)} is not a configured build")
    if os.path.realpath(work).startswith(os.path.realpath(root) + os.sep):
        sys.exit(f"--reuse-build: DSLAUNCH_MUTATE_DIR {work} is inside the working tree, which the copy hides")
    tree, real = os.path.join(work, "tree"), os.path.join(work, "real")
    if not os.path.isdir(tree):
        print(f"copying {root} with {args.reuse_build}/ to {tree} (once)", flush=True)
        os.makedirs(work, exist_ok=True)
        subprocess.run(["cp", "-a", root, tree], check=True)
    os.makedirs(real, exist_ok=True)
    inner = ["python3", "-", root] + sys.argv[2:] + ["--inside"]
    # This program as the working tree has it (the copy's may be older), fed to python3 on stdin as
    # the shell part above does; inside, `root` names the copy.
    script = open(os.path.join(root, "scripts", "mutate.sh")).read()
    program = script[script.index("<<'PY'\n") + len("<<'PY'\n"):script.rindex("\nPY")]
    shell = (f"mount --bind {shlex.quote(root)} {shlex.quote(real)} && "
             f"mount --bind {shlex.quote(tree)} {shlex.quote(root)} && exec " + " ".join(map(shlex.quote, inner)))
    sys.exit(subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", shell], input=program.encode())
             .returncode)
os.makedirs(logs, exist_ok=True)
os.makedirs(build, exist_ok=True)
lock = open(os.path.join(work, "lock"), "w")  # one run at a time per scratch tree
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print(f"another scripts/mutate.sh is using {work}; waiting for it", flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
print(f"scratch tree {src}: {sync_tree()} file(s) updated from {sync_from}", flush=True)
setup_log = os.path.join(logs, "setup.log")
open(setup_log, "w").close()
if not args.reuse_build and not os.path.isfile(os.path.join(build, "build.ninja")):
    # One unit per file: a mutant then recompiles its own file, not a batch of eight.
    if run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DDSLAUNCH_BUILD_BENCHMARKS=OFF",
            "-DDSLAUNCH_UNITY_BUILD=OFF"], setup_log) != 0:
        sys.exit(f"configuring {build} failed: see {setup_log}")
all_targets = sorted({t for m in mutations for t in m.targets})
if not build_targets(all_targets, setup_log):
    sys.exit(f"building the unmutated targets failed: see {setup_log}")
# Every (target, cases) run of the selected lines must pass before any mutant means anything.
# And each must run at least one test case: a filter that selects none would let every mutant
# "survive" or, worse, a typo in it would make a line look caught by a test that never ran.
for t, cases in sorted({(t, tuple(m.doctest_args)) for m in mutations for t in m.targets}):
    size_before = os.path.getsize(setup_log)
    if run([os.path.join(build, "tests", t)] + list(cases), setup_log, timeout) != 0:
        print(f"the unmutated {t} {' '.join(cases)} fails: see {setup_log}")
        sys.exit(3)
    with open(setup_log) as f:
        f.seek(size_before)
        ran = re.findall(r"^\[doctest\] test cases: *(\d+) \|", f.read(), re.M)
    if not ran or int(ran[-1]) == 0:
        print(f"the unmutated {t} {' '.join(cases)} runs no test case: fix the line's doctest arguments")
        sys.exit(3)
print(f"unmutated targets build and pass ({time.monotonic() - start:.0f} s): {' '.join(all_targets)}", flush=True)

caught, survived, invalid = [], [], []
for m in mutations:
    t0 = time.monotonic()
    log = os.path.join(logs, f"line{m.line}.log")
    with open(log, "w") as out:
        out.write(m.describe() + "\n")
    path = os.path.join(src, m.file)
    with open(path) as f:
        original = f.read()
    try:
        with open(path, "w") as f:
            f.write(original.replace(m.pattern, m.replacement, 1))
        if not build_targets(m.targets, log):
            invalid.append(m)
            verdict = "DOES NOT BUILD"
        elif tests_pass(m, log):
            survived.append(m)
            verdict = "SURVIVED"
        else:
            caught.append(m)
            verdict = "caught"
    finally:
        with open(path, "w") as f:
            f.write(original)
    print(f"{verdict:>14}  {m.describe()}  [{' '.join(m.targets)}] ({time.monotonic() - t0:.0f} s)", flush=True)

# Leave the build matching the restored sources, so the next run starts from cache hits.
build_targets(all_targets, setup_log)
elapsed = time.monotonic() - start
print(f"mutations: {len(caught)} caught, {len(survived)} survived, {len(invalid)} did not build "
      f"(of {len(mutations)}; {elapsed / 60:.1f} min; logs in {logs})")
for m in survived:
    print(f"  survived: {m.describe()}")
sys.exit(3 if invalid else 1 if survived else 0)
PY
