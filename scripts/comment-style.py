#!/usr/bin/env python3
"""How the comments of src/ read: parentheses and colons or semicolons per
sentence, and measurements (a figure with a unit) in doc comments.

The house style asks for one claim per sentence: at most 0.2 parentheses and
0.3 colons or semicolons per sentence across src/, and no figure with a unit
(ns, µs, ms, %) in a doc comment, since measurements belong to benches and
DESIGN.md. Code inside comments (fenced blocks, `inline code`, paths with
`::`) and table rows are not prose and are left out.

Usage: scripts/comment-style.py [--files N] [--figures]
  --files N   also list the N files with the most of each per sentence
  --figures   list every figure with a unit found in a doc comment
Last line: the totals, and whether the limits are met (exit status 1 if not).
"""
import os
import re
import sys

PARENS_LIMIT = 0.2
COLONS_LIMIT = 0.3
UNIT_FIGURE = re.compile(r"\d[\d,.]*\s?(?:ns|µs|us|ms|%)(?![A-Za-z])")


def comment_lines(text):
    """(kind, line_no, text) of each comment line; kind is 'doc' or 'plain'."""
    out = []
    in_fence = False
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"(///|//!|//)\s?(.*)", stripped)
        if not m:
            in_fence = False
            continue
        marker, body = m.groups()
        if body.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or body.lstrip().startswith("|"):
            continue
        kind = "doc" if marker in ("///", "//!") else "plain"
        out.append((kind, no, body))
    return out


def prose(body):
    """The sentence text of a comment line, without code."""
    body = re.sub(r"`[^`]*`", "x", body)
    body = re.sub(r"https?://\S+", "x", body)
    body = re.sub(r"\[[^\]]*\]\([^)]*\)", "x", body)  # links: [text](target)
    body = body.replace("::", "")
    return body


def sentences(lines):
    """Sentences of consecutive comment lines joined as paragraphs."""
    paragraphs, current, last_no = [], [], None
    for _, no, body in lines:
        if last_no is not None and no != last_no + 1 or not body.strip():
            if current:
                paragraphs.append(" ".join(current))
            current = []
        if body.strip():
            current.append(prose(body))
        last_no = no
    if current:
        paragraphs.append(" ".join(current))
    out = []
    for paragraph in paragraphs:
        parts = re.split(r"(?<=[.!?])\s+(?=[A-Z`*(\"'])", paragraph)
        out += [p for p in parts if re.search(r"[A-Za-z]{2}", p)]
    return out


def main():
    args = sys.argv[1:]
    top = int(args[args.index("--files") + 1]) if "--files" in args else 0
    show_figures = "--figures" in args
    totals = {"sentences": 0, "parens": 0, "colons": 0}
    per_file, figures = [], []
    for root, _, names in os.walk("src"):
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            lines = comment_lines(open(path, encoding="utf-8").read())
            said = sentences(lines)
            parens = sum(s.count("(") for s in said)
            colons = sum(s.count(":") + s.count(";") for s in said)
            totals["sentences"] += len(said)
            totals["parens"] += parens
            totals["colons"] += colons
            per_file.append((path, len(said), parens, colons))
            for kind, no, body in lines:
                if kind == "doc":
                    for m in UNIT_FIGURE.finditer(re.sub(r"`[^`]*`", "", body)):
                        figures.append(f"{path}:{no}: {m.group(0)}")
    n = max(totals["sentences"], 1)
    parens, colons = totals["parens"] / n, totals["colons"] / n
    if top:
        for label, index in (("parentheses", 2), ("colons or semicolons", 3)):
            print(f"most {label} per sentence:")
            ranked = sorted(per_file, key=lambda f: f[index] / max(f[1], 1), reverse=True)
            for path, count, *_ in ranked[:top]:
                row = next(f for f in per_file if f[0] == path)
                print(f"  {row[index] / max(count, 1):.2f}  {path} ({count} sentences)")
    if show_figures:
        for figure in figures:
            print(figure)
    ok = parens <= PARENS_LIMIT and colons <= COLONS_LIMIT and not figures
    print(
        f"comment-style: {totals['sentences']} sentences; {parens:.2f} parentheses "
        f"and {colons:.2f} colons or semicolons per sentence (limits {PARENS_LIMIT}, "
        f"{COLONS_LIMIT}); {len(figures)} figures with a unit in doc comments"
        + ("" if ok else "; over")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
