#!/usr/bin/env python3
"""Weakens each non-Relaxed memory ordering in src/ one at a time and runs
the loom models against each mutant: every mutant should make a model fail,
unless docs/DESIGN.md lists its site as an argued exception.

Rules: Acquire or Release -> Relaxed; AcqRel -> Acquire and -> Release;
SeqCst -> the weakest ordering the operation allows beside it (Acquire for
a load, Release for a store, AcqRel for an RMW). A fence is removed rather
than weakened: `fence(Relaxed)` panics in std and in loom, which would
kill the mutant in whichever model first reaches it, not in the model that
needs the fence.

    scripts/ordering-mutants.py                 # every site
    scripts/ordering-mutants.py src/state.rs    # sites in files matching
    scripts/ordering-mutants.py src/state.rs:252  # one site
    scripts/ordering-mutants.py --list          # the mutants, not run
    LOOM_TEST=loom_refresh scripts/ordering-mutants.py src/refresh
                                                # one test binary only

Runs the loom package as CI does (RUSTFLAGS="--cfg loom -C
debug-assertions", its own target directory), stopping at the first
failing test binary. Restores every file it touched, also when
interrupted. Prints one line per mutant and a summary with the time taken;
exits 1 if a mutant survives that DESIGN.md does not list.
"""

import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDERING = re.compile(r"\b(?:Ordering::)?(Acquire|Release|AcqRel|SeqCst)\b")
# Files that hold only tests, or test-only code.
SKIP = re.compile(r"(^|/)(tests?|model_tests)\.rs$|/tests/")


def sites():
    """(file, line number, column, ordering, weaker) for every mutant."""
    found = []
    for base, _, files in os.walk(os.path.join(ROOT, "src")):
        for name in sorted(files):
            path = os.path.relpath(os.path.join(base, name), ROOT)
            if not name.endswith(".rs") or SKIP.search(path):
                continue
            with open(os.path.join(ROOT, path)) as f:
                lines = f.readlines()
            for number, line in enumerate(lines, 1):
                code = line.split("//", 1)[0]
                if code.lstrip().startswith("use ") or "Ordering::{" in code:
                    continue  # an import, not an operation
                for match in ORDERING.finditer(code):
                    ordering = match.group(1)
                    for weaker in weakened(ordering, code):
                        found.append((path, number, match.start(1), ordering, weaker))
    return sorted(found)


# The mutant that stands for a fence's weakening.
REMOVED = "removed"


def is_fence(code):
    return re.search(r"\bfence\(", code) is not None and code.rstrip().endswith(";")


def weakened(ordering, code):
    if is_fence(code):
        return [REMOVED]
    if ordering in ("Acquire", "Release"):
        return ["Relaxed"]
    if ordering == "AcqRel":
        return ["Acquire", "Release"]
    if ".load(" in code:
        return ["Acquire"]
    if ".store(" in code:
        return ["Release"]
    return ["AcqRel"]


def exceptions():
    """Sites DESIGN.md's audit lists as argued exceptions: `file:line`
    entries on the lines of its "Argued exceptions" list."""
    listed = set()
    with open(os.path.join(ROOT, "docs", "DESIGN.md")) as f:
        inside = False
        for line in f:
            if line.startswith("#"):
                inside = "argued exceptions" in line.lower()
                continue
            if inside:
                for entry in re.findall(r"`(src/[\w/]+\.rs):(\d+)", line):
                    listed.add((entry[0], int(entry[1])))
    return listed


def run_models():
    env = dict(os.environ)
    env["RUSTFLAGS"] = "--cfg loom -C debug-assertions"
    env["CARGO_TARGET_DIR"] = os.path.join(ROOT, "target", "loom")
    command = ["cargo", "test", "--release", "-p", "circulation-trigger-loom-tests"]
    if os.environ.get("LOOM_TEST"):
        command += ["--test", os.environ["LOOM_TEST"]]
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if result.returncode == 0:
        return "survives", ""
    failed = re.findall(r"^test (\S+) \.\.\. FAILED", result.stdout, re.M)
    if failed:
        return "killed", failed[0]
    if "error[" in result.stdout or "could not compile" in result.stdout:
        return "no-build", ""
    return "killed", "(a model panicked)"


def chosen(selector, site):
    """`src/state.rs` picks a file's sites, `src/state.rs:252` one site."""
    path, line = site[0], site[1]
    if ":" in selector:
        return selector == f"{path}:{line}"
    return selector in path


def main():
    # A SIGTERM unwinds like Ctrl-C, so the mutated file is restored.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = sys.argv[1:]
    only = [a for a in args if not a.startswith("--")]
    mutants = [s for s in sites() if not only or any(chosen(o, s) for o in only)]
    if "--list" in args:
        for path, line, _, ordering, weaker in mutants:
            print(f"{path}:{line} {ordering} -> {weaker}")
        print(f"{len(mutants)} mutants")
        return 0
    listed = exceptions()
    start = time.monotonic()
    survivors = []
    for path, line, column, ordering, weaker in mutants:
        full = os.path.join(ROOT, path)
        with open(full) as f:
            original = f.read()
        lines = original.splitlines(keepends=True)
        text = lines[line - 1]
        if weaker == REMOVED:
            indent = text[: len(text) - len(text.lstrip())]
            lines[line - 1] = f"{indent}// the fence, removed by a mutant\n"
        else:
            lines[line - 1] = text[:column] + weaker + text[column + len(ordering):]
        try:
            with open(full, "w") as f:
                f.write("".join(lines))
            began = time.monotonic()
            verdict, by = run_models()
        finally:
            with open(full, "w") as f:
                f.write(original)
        note = ""
        if verdict == "survives":
            note = "argued exception" if (path, line) in listed else "SURVIVOR"
            if (path, line) not in listed:
                survivors.append(f"{path}:{line} {ordering} -> {weaker}")
        print(
            f"{path}:{line} {ordering} -> {weaker}: {verdict} {by} {note} "
            f"({time.monotonic() - began:.0f} s)",
            flush=True,
        )
    minutes = (time.monotonic() - start) / 60
    print(f"{len(mutants)} mutants, {len(survivors)} unlisted survivors, {minutes:.1f} min")
    for survivor in survivors:
        print(f"  survivor: {survivor}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
