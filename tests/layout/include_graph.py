#!/usr/bin/env python3
"""The include graph between the source folders points one way (docs/source-layout.md).

Reads every #include "..." of the project's sources, maps each file to its folder, and fails
naming the file and line of every include that points up the layer order below (or sideways
between folders of one layer), and of any cycle between folders. Usage:

    include_graph.py SOURCE_DIR            check, print nothing but errors; exit 1 on any
    include_graph.py SOURCE_DIR --print    also print the folder graph with include counts
"""
import os
import re
import sys

# Layers of each tree, lowest first. A folder may include its own files and folders of lower layers
# only. The top of a tree (its programs) stands above everything of its tree.
RUNTIME_LAYERS = [
    ["runtime/core", "runtime/parallel"],
    ["runtime/ops"],
    ["runtime/comm", "runtime/models", "runtime/data", "runtime/swap"],
    ["runtime/engine"],
    ["runtime/config"],
    ["runtime/checkpoint"],
    ["runtime/train"],
    ["runtime"],  # worker_main.cc
]
LAUNCHER_LAYERS = [
    ["launcher/plan", "launcher/machine"],
    ["launcher/slurm", "launcher/elastic", "launcher/node_mode", "launcher/start"],
    ["launcher/start/ssh", "launcher/status"],
    ["launcher/start/srun"],
    ["launcher/job", "launcher/cli"],
    ["launcher"],  # main.cc
]
AGENT_LAYERS = [
    ["agent/node", "agent/workers", "agent/store_proxy", "agent/control", "agent/replica"],
    ["agent/progress"],
    ["agent"],  # the session, main.cc, the start relay
]
LAYERS = {"runtime": RUNTIME_LAYERS, "launcher": LAUNCHER_LAYERS, "agent": AGENT_LAYERS}
# Trees: common/ is used by all and uses none; the launcher, agent and runtime do not use each other.
TREE_USES = {
    "common": set(),
    "launcher": {"common"},
    "agent": {"common"},
    "runtime": {"common"},
    "examples": {"common"},
}
# Narrower edges between trees, by path prefix, each with its reason. The agent hosts the start
# relay of an SSH start tree (agent/start_relay.cc, docs/ssh.md "The start tree"): on a tree head
# it is the launcher's SSH starter at work, in the one binary pre-flight guarantees on every node.
PATH_USES = {
    "agent": ("launcher/start/",),
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh")


def folder_of(tree, path):
    """The layer folder of a file: runtime/X for runtime/X/... (ops/cpu and ops/cuda are one
    folder, as are comm/ and its backends); in launcher/ and agent/ the file's own folder."""
    parts = path.split("/")
    if len(parts) == 2:
        return tree
    return tree + "/" + parts[1] if tree == "runtime" else "/".join(parts[:-1])


def layer_of(tree, folder):
    for i, layer in enumerate(LAYERS[tree]):
        if folder in layer:
            return i
    return None


def main():
    root = sys.argv[1]
    show = "--print" in sys.argv[2:]
    errors = []
    edges = {}
    for tree in TREE_USES:
        for dirpath, _, files in os.walk(os.path.join(root, tree)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                with open(full, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        target = m.group(1)
                        to_tree = target.split("/")[0]
                        if to_tree not in TREE_USES or to_tree == tree:
                            if to_tree == tree and tree in LAYERS:
                                check_layers(tree, rel, lineno, target, errors, edges)
                            continue
                        if to_tree not in TREE_USES[tree] and not target.startswith(PATH_USES.get(tree, ())):
                            errors.append(f"{rel}:{lineno}: {tree}/ must not include {target}: "
                                          f"{tree}/ may use {sorted(TREE_USES[tree]) or 'nothing'}")
    errors += cycles(edges)
    if show:
        for (a, b), n in sorted(edges.items()):
            print(f"{a} -> {b}  ({n} includes)")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


def check_layers(tree, rel, lineno, target, errors, edges):
    src, dst = folder_of(tree, rel), folder_of(tree, target)
    if src == dst:
        return
    edges[(src, dst)] = edges.get((src, dst), 0) + 1
    ls, ld = layer_of(tree, src), layer_of(tree, dst)
    if ls is None or ld is None:
        unknown = src if ls is None else dst
        errors.append(f"{rel}:{lineno}: {unknown}/ is in no layer of tests/layout/include_graph.py: "
                      "add it there and to docs/source-layout.md")
    elif ld >= ls:
        errors.append(f"{rel}:{lineno}: {src}/ includes {target}, which is in {dst}/, "
                      f"a layer {'beside' if ld == ls else 'above'} it "
                      "(the order is in docs/source-layout.md)")


def cycles(edges):
    """Cycles between folders (depth-first search), as error lines."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    found, state = [], {}

    def visit(node, path):
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                found.append("folders include each other in a circle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


if __name__ == "__main__":
    sys.exit(main())
