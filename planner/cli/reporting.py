"""``meshplan report plan.json [--format md|html] [-o FILE]``: the plan as a reviewer reads it.

Markdown renders in a code-review page; HTML is one self-contained file (inline CSS and SVG charts,
no network loads). The format follows ``--format``, else the ``-o`` extension, else Markdown.
The module is ``reporting`` (as ``listing`` serves ``list``): a submodule named ``report`` would
replace ``planner.cli.report``, the function ``main`` maps errors with.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from planner.cli._common import EXIT_OK, UsageError, add_retrace, add_subparser, check_output, stdout_to_stderr, write_output

_EXAMPLES = """\
  meshplan report plan.json                      # Markdown on stdout
  meshplan report plan.json -o report.html       # one self-contained HTML file
  meshplan report plan.json --format md -o PLAN.md
  meshplan report plan.json --no-reestimate      # plan facts only (no model needed)"""

_DESCRIPTION = """\
Explain a plan: predicted step time, tokens/s, MFU and memory against capacity; the mesh and which
groups cross the network; every pipeline stage; where time and memory go; the pipeline schedule; why
the plan beat its runner-up; sensitivity to bandwidth, efficiency and node count; the search facts,
assumptions, a glossary; and the launcher fragments for Megatron-LM, torchtitan and DeepSpeed."""

SUFFIX_FORMAT = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = add_subparser(subparsers, "report", "explain a plan as Markdown or HTML", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="a plan written by meshplan plan")
    parser.add_argument("--format", choices=("md", "html"), help="md or html (default: from -o's extension, else md)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout ('-' is stdout)")
    parser.add_argument("--no-reestimate", action="store_true",
                        help="skip the re-estimates that need the model (per-stage memory split, runner-up breakdown, sensitivity)")
    add_retrace(parser)
    parser.set_defaults(run=run)


def pick_format(fmt: str | None, output: str | None) -> str:
    """``--format`` if given, else from the output file's extension, else md."""
    if fmt:
        return fmt
    if output and output != "-":
        suffix = Path(output).suffix.lower()
        if suffix and suffix not in SUFFIX_FORMAT:
            raise UsageError(f"report: cannot tell the format of '{output}' (use .md or .html, or --format)")
        return SUFFIX_FORMAT.get(suffix, "md")
    return "md"


def write_report(plan_path: str, output: str | None, fmt: str | None, reestimate: bool = True, retrace: bool = False) -> str:
    """Render the report of ``plan_path`` once it validates and write it (stdout for None or '-');
    return the format."""
    from planner.plans.load import load_plan_and_model

    chosen = pick_format(fmt, output)
    if output is not None and output != "-":
        check_output(output, "-o")
    with stdout_to_stderr():  # a re-traced factory's prints
        plan, model = load_plan_and_model(plan_path, retrace)
    return save_report(plan, output, chosen, reestimate, model)


def save_report(plan: Any, output: str | None, fmt: str | None = None, reestimate: bool = True, model: Any = None) -> str:
    """Render the report of a ``Plan`` and write it atomically (stdout for None or '-'); return the
    format. ``meshplan plan --report FILE`` calls this with the plan it has just written."""
    from planner.outputs.report import render_report

    chosen = pick_format(fmt, output)
    text = render_report(plan, chosen, model=model, reestimate=reestimate)
    if output is None or output == "-":
        sys.stdout.write(text)
    else:
        write_output(output, text, "-o")
        print(f"meshplan: wrote {output} ({chosen}, {len(text.encode()) / 1024:.0f} KiB)", file=sys.stderr)
    return chosen


def run(args: argparse.Namespace) -> int:
    """Write the report; bad input leaves as an exception for ``main``."""
    write_report(args.plan, args.output, args.format, not args.no_reestimate, args.retrace)
    return EXIT_OK
