"""The command line's frame: global options anywhere on the line, usage errors in the project's
format, Ctrl-C and closed pipes handled once for every command.

Nothing here imports the library beyond its error classes: a command pays only for what it uses.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperCommand, TyperGroup

# Shared with the typer-free `state` path, which must not import typer.
from pithledger.cli._fast import EXIT_PIPE, GLOBAL_FLAGS, quiet_closed_pipe
from pithledger.cli._fast import GLOBAL_VALUE_OPTIONS as _FAST_VALUE_OPTIONS
from pithledger.cli._stdout import error_line, output_failed, report_output_failure

#: --key-dir is global too; the typer-free `state` path never needs it (an argument list holding it
#: goes to the full command line).
GLOBAL_VALUE_OPTIONS = _FAST_VALUE_OPTIONS | {"--key-dir"}
GLOBAL_HELP = (
    "Global options (before or after the command): --ledger PATH (default: $PITHLEDGER_LEDGER, else "
    "$XDG_DATA_HOME/pithledger), --key-dir DIR (default: $PITHLEDGER_KEYS, else $XDG_CONFIG_HOME/pithledger/keys), "
    "--json (machine-readable output, errors too), -q/--quiet (no progress or notes on stderr)."
)

EXIT_INTERRUPTED = 130
#: fsck could not check the ledger (its scratch had no room anywhere, the ledger could not be opened): 1 is
#: a verdict (faults found), this is none (README, spec/storage.md §6).
EXIT_UNCHECKED = 3


@dataclass
class Settings:
    """What the global options say, shared by every command through ``ctx.obj``."""

    ledger_option: Optional[Path] = None
    json: bool = False
    quiet: bool = False
    key_dir: Optional[Path] = None

    @property
    def ledger(self) -> Path:
        if self.ledger_option is not None:
            return self.ledger_option
        from pithledger.store import default_ledger_path

        return default_ledger_path()


def settings(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings()


def current_settings() -> Settings:
    """The global options of the command running now (for helpers not handed its context)."""
    import importlib

    try:  # typer vendors click in new versions and uses click in old ones
        globals_ = importlib.import_module("typer._click.globals")
    except ImportError:  # pragma: no cover - an older typer
        globals_ = importlib.import_module("click.globals")
    ctx = globals_.get_current_context(silent=True)
    return settings(ctx) if ctx is not None else Settings()


# --- global options anywhere -----------------------------------------------------------------------


def _declared(cmd: Any) -> tuple[set[str], set[str]]:
    """(every option name the command declares, the ones that take a value)."""
    names: set[str] = set()
    valued: set[str] = set()
    for param in getattr(cmd, "params", []):
        opts = [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]
        if not any(o.startswith("-") for o in opts):
            continue  # an argument
        names.update(opts)
        if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
            valued.update(opts)
    return names, valued


def _extract(cmd: Any, ctx: Any, args: list[str]) -> tuple[list[str], list[str]]:
    """Split the words after a command into (global options, the rest), recursing into groups.

    A command that declares an option of the same name (``apply --json``) keeps it; values of the
    command's own options are never mistaken for options; nothing after ``--`` moves.
    """
    own, valued = _declared(cmd)
    moved: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            kept += args[i:]
            break
        name, eq, _ = word.partition("=")
        if name in (GLOBAL_VALUE_OPTIONS | GLOBAL_FLAGS) and name not in own:
            moved.append(word)
            i += 1
            if name in GLOBAL_VALUE_OPTIONS and not eq and i < len(args):
                moved.append(args[i])
                i += 1
            continue
        if isinstance(cmd, TyperGroup) and not word.startswith("-"):
            sub = cmd.get_command(ctx, word)
            if sub is None:
                kept += args[i:]
                break
            m, k = _extract(sub, ctx, args[i + 1 :])
            return moved + m, kept + [word] + k
        kept.append(word)
        i += 1
        if word in valued and i < len(args):
            kept.append(args[i])
            i += 1
    return moved, kept


def hoist_global_options(group: TyperGroup, ctx: Any, args: list[str]) -> list[str]:
    """``pithledger state --ledger X ID`` -> ``pithledger --ledger X state ID``."""
    _, valued = _declared(group)
    front: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        front.append(args[i])
        i += 1
        if args[i - 1] in valued and i < len(args):
            front.append(args[i])
            i += 1
    if i >= len(args):
        return args
    sub = group.get_command(ctx, args[i])
    if sub is None:
        return args  # click names the unknown command
    moved, kept = _extract(sub, ctx, args[i + 1 :])
    return front + moved + [args[i]] + kept


# --- the classes every command and group is built with ---------------------------------------------


def wants_json(ctx: Any) -> bool:
    """--json was given, globally or to the command itself (its ``as_json`` option)."""
    return bool(settings(ctx).json or (getattr(ctx, "params", None) or {}).get("as_json"))


def emit_error(doc: dict[str, str]) -> None:
    """An error as --json prints it on stdout (besides the message on stderr), one line."""
    sys.stdout.write(error_line(doc))
    sys.stdout.flush()


#: How many _run calls are under way (the root group's, then its command's).
_running = 0


def _run(invoke: Any, ctx: Any) -> Any:
    from pithledger.cli._signals import interruptible, quiet_interrupts
    from pithledger.errors import PithledgerError

    global _running
    _running += 1
    try:
        interruptible()  # Ctrl-C is the command's to handle from here: below, not typer's silent Exit(130)
        return invoke(ctx)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        quiet_closed_pipe()
        raise typer.Exit(EXIT_PIPE) from None
    except UsageProblem as exc:
        hint = exc.hint or usage_hint(ctx)
        typer.echo(f"error[usage]: {exc.message}", err=True)
        typer.echo(f"hint: {hint}", err=True)
        if wants_json(ctx):
            emit_error({"error": "usage", "message": exc.message, "hint": hint})
        raise typer.Exit(2) from None
    except PithledgerError as exc:
        typer.echo(exc.describe(), err=True)
        if wants_json(ctx):
            emit_error(exc.document())
        raise typer.Exit(1) from None
    except OSError as exc:
        if not output_failed(exc):
            raise
        raise typer.Exit(report_output_failure(exc)) from None
    finally:
        _running -= 1
        if not _running:  # the command is over, its message written: what is left is the exit
            quiet_interrupts()


#: What help shows for an option's value when its declaration names no metavar (typer would show
#: the Python type, ``<int range>``, ``<str>``, ``<list[str]>``).
_METAVARS = {"int": "N", "float": "NUMBER", "str": "TEXT", "Path": "PATH", "bool": "BOOLEAN"}


def _plain_help(param: Any) -> None:
    """Help that speaks of values, not Python types: an argument is shown by its metavar alone (its
    help says what it takes), an option without a metavar by a word for its kind of value."""
    if getattr(param, "param_type_name", "") == "argument":
        param.display_type_rich = lambda ctx: None
    elif getattr(param, "metavar", None) is None and hasattr(param, "display_type"):
        bare = getattr(param, "bare_type", lambda: "")()
        word = _METAVARS.get(bare.removeprefix("list[").removesuffix("]"), "VALUE")
        param.display_type_rich = lambda ctx: word


class Command(TyperCommand):
    """A command: global options are described in its help; Ctrl-C and closed pipes end it quietly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plain_help(param)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        formatter.write_paragraph()
        formatter.write_text(GLOBAL_HELP)

    def invoke(self, ctx: Any) -> Any:
        return _run(super().invoke, ctx)


class Group(TyperGroup):
    """The root group moves global options written after the command to the front."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plain_help(param)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = hoist_global_options(self, ctx, list(args))
        result: list[str] = super().parse_args(ctx, args)
        return result

    def invoke(self, ctx: Any) -> Any:
        return _run(super().invoke, ctx)


# --- usage errors ------------------------------------------------------------------------------------


def usage_hint(ctx: Any) -> str:
    path = ctx.command_path if ctx is not None else "pithledger"
    return f"run '{path} --help'"


def report_usage_error(exc: Exception) -> int:
    """Print a click usage error as ``error[usage]: ...`` + ``hint: ...``; return the exit code."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help(), err=True)
        return 2
    fmt = getattr(exc, "format_message", None)
    message = fmt() if callable(fmt) else str(exc)
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    typer.echo(f"error[usage]: {message}", err=True)
    typer.echo(f"hint: {usage_hint(ctx)}", err=True)
    if _json_requested(sys.argv[1:]):  # the line did not parse: the words say whether --json was meant
        emit_error({"error": "usage", "message": message, "hint": usage_hint(ctx)})
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 2


def _json_requested(argv: list[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def is_click_error(exc: BaseException) -> bool:
    return any(cls.__name__ == "ClickException" for cls in type(exc).__mro__)


class UsageProblem(Exception):
    """A command line that parsed but makes no sense (exit 2), e.g. two options that exclude each other."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
