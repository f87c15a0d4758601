"""The ``calib`` command: ``calib book run``, ``calib book build``."""

from __future__ import annotations

import argparse
import ast
import sys

from calib import book


def _parse_value(text: str):
    """A parameter value: a Python literal when it parses as one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calib", description="The focal-calibration book and its library.")
    commands = parser.add_subparsers(dest="command", required=True)

    book_parser = commands.add_parser("book", help="execute and render the book")
    book_commands = book_parser.add_subparsers(dest="book_command", required=True)
    run = book_commands.add_parser("run", help="execute the chapters of _toc.yml with papermill into _build/")
    run.add_argument("--profile", choices=book.PROFILES, default="quick",
                     help="quick: CPU, minutes for the whole book; full: paper scale, GPU if present")
    run.add_argument("--only", action="append", metavar="NAME",
                     help="run only this chapter (e.g. 01-measuring-calibration); repeatable")
    run.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                     help="override a chapter parameter, e.g. -p seed 3 (values are Python literals)")
    run.add_argument("--keep-going", action="store_true", help="run the remaining chapters after a failure")
    build = book_commands.add_parser("build", help="render the executed chapters with jupyter-book")
    build.add_argument("--no-strict", action="store_true", help="do not turn Sphinx warnings into errors")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = book.repo_root()
    try:
        if args.command == "book" and args.book_command == "run":
            params = {name: _parse_value(value) for name, value in args.parameter}
            book.run_book(root, profile=args.profile, only=args.only, parameters=params, keep_going=args.keep_going)
        elif args.command == "book" and args.book_command == "build":
            book.build_book(root, strict=not args.no_strict)
    except (book.ChapterError, ValueError, FileNotFoundError) as exc:
        print(f"calib: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
