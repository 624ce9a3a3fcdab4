"""Copies the benchmark tables from benchmarks/results/ into README.md between marker comments.

    .venv/bin/python benchmarks/readme_tables.py [--readme README.md] [--results DIR] [--check]

README.md holds `<!-- bench:NAME -->` ... `<!-- /bench:NAME -->` pairs; everything between a
pair is replaced by results/<BLOCKS[NAME]> (written by run.py, torch_adapter.py, tf_adapter.py,
graph.py).
A block whose results file is missing is left as it is (and said so). `--check` changes nothing
and exits 1 when README.md is not what the results give.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOCKS = {"x86": "x86_summary.md", "torch": "torch_adapter.md", "tf": "tf_adapter.md",
          "graph": "graph.md"}


def replace_blocks(text: str, blocks: dict[str, str]) -> str:
    """`text` with the content between each `<!-- bench:NAME -->` / `<!-- /bench:NAME -->` pair
    replaced by blocks[NAME] (a blank line on either side, so tables render); names not in
    `blocks` are kept. Raises ValueError for an unpaired, repeated or nested marker."""
    opens = re.findall(r"<!-- bench:([\w-]+) -->", text)
    closes = re.findall(r"<!-- /bench:([\w-]+) -->", text)
    for name in set(opens) | set(closes):
        if opens.count(name) != 1 or closes.count(name) != 1:
            raise ValueError(f"README markers for {name!r}: {opens.count(name)} opening and "
                             f"{closes.count(name)} closing, expected one of each")
    pattern = re.compile(r"(<!-- bench:([\w-]+) -->)(.*?)(<!-- /bench:([\w-]+) -->)", re.S)

    def sub(m: re.Match) -> str:
        name, body, end = m.group(2), m.group(3), m.group(5)
        if name != end or "<!-- bench:" in body:
            raise ValueError(f"README marker <!-- bench:{name} --> is closed by "
                             f"<!-- /bench:{end} -->, expected <!-- /bench:{name} -->")
        if name not in blocks:
            return m.group(0)
        return f"{m.group(1)}\n\n{blocks[name].strip()}\n\n{m.group(4)}"

    return pattern.sub(sub, text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--readme", type=Path, default=HERE.parent / "README.md")
    p.add_argument("--results", type=Path, default=HERE / "results")
    p.add_argument("--check", action="store_true", help="report, change nothing")
    args = p.parse_args()
    blocks = {}
    for name, file in BLOCKS.items():
        path = args.results / file
        if path.exists():
            blocks[name] = path.read_text()
        else:
            print(f"{path} is missing: the {name} block stays as it is", file=sys.stderr)
    text = args.readme.read_text()
    try:
        new = replace_blocks(text, blocks)
    except ValueError as e:
        print(f"{args.readme}: {e}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{args.readme}: " + ("up to date" if new == text else "tables differ"))
        return 0 if new == text else 1
    if new != text:
        args.readme.write_text(new)
    print(f"{args.readme}: " + ("tables replaced" if new != text else "already up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
