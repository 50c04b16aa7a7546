"""The habits every fxprobe command shares, applied in one place when a command is loaded (see main.LazyGroup):

- ``--json`` and ``-o/--output-format json`` after the command as well as before it (nvme-cli users type
  ``nvme list -o json``); ``-o normal`` turns JSON off again;
- duration and rate options say their units in their help (the types are cli.options.duration/rate);
- each command's help ends with its examples (cli.examples);
- shell completion of profile, scenario and lab names;
- older spellings of renamed options still accepted for a release, with one deprecation line on stderr.
"""

from __future__ import annotations

import click

from fxprobe.cli.app import App
from fxprobe.cli.examples import EXAMPLES
from fxprobe.cli.options import Quantity

OUTPUT_FORMATS = ("normal", "json")

# Renamed options: command path -> {old spelling: new spelling}. A path names a command or a group (then every
# command under it). Kept for one release after the rename; the help shows only the new spelling.
DEPRECATED: dict[str, dict[str, str]] = {
    "lab": {"--name": "--lab"},
    "fault run": {"--allow": "--allow-serial", "--lab-name": "--lab"},
    "profile gen": {"--output": "--out"},
    "model-switch": {"--overhead-s": "--overhead", "--read-gbps": "--read-rate"},
}
# Old spellings whose bare numbers meant another unit: the value is rewritten with its old unit written out.
OLD_BARE_UNIT = {("model-switch", "--read-gbps"): "GB/s"}


SECRET_OPTIONS = ("--dhchap-secret", "-S", "--dhchap-ctrl-secret", "-C")


def redact_argv(args: list[str]) -> list[str]:
    """The command line as results.json records it: DH-CHAP keys shown as <secret>."""
    out, hide = [], False
    for token in args:
        name, eq, _ = token.partition("=")
        if hide:
            out.append("<secret>")
        elif eq and name in SECRET_OPTIONS:
            out.append(f"{name}=<secret>")
        else:
            out.append(token)
        hide = not hide and not eq and token in SECRET_OPTIONS
    return out


def _set_format(ctx: click.Context, param: click.Parameter, value) -> None:
    if value is None or value is False:
        return
    app = ctx.find_object(App)
    if app is not None:
        app.json_output = value is True or value == "json"


def output_options() -> list[click.Option]:
    """The two spellings of machine-readable output, as options of one command."""
    return [
        click.Option(["--json"], is_flag=True, default=None, expose_value=False, callback=_set_format,
                     help="Print the machine-readable result on stdout (same as -o json, or --json before the command)."),
        click.Option(["-o", "--output-format"], type=click.Choice(OUTPUT_FORMATS), default=None, expose_value=False,
                     callback=_set_format, metavar="FORMAT", help="normal or json (as nvme-cli's -o json)."),
    ]


def adopt(command: click.Command, path: str) -> click.Command:
    """Give ``command`` (and every command under it) the shared habits; idempotent."""
    if getattr(command, "_fxprobe_adopted", False):
        return command
    command._fxprobe_adopted = True
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            adopt(sub, f"{path} {name}")
    else:
        if any(isinstance(p, click.Argument) and p.nargs == -1 and p.type is click.UNPROCESSED for p in command.params):
            command.allow_interspersed_args = False   # `lab exec GUEST nvme list -o json`: -o is the guest's
        taken = {opt for param in command.params for opt in param.opts}
        command.params.extend(o for o in output_options() if not taken & set(o.opts))
    for param in command.params:
        _unit_help(param)
        _completion(param, path)
    examples = EXAMPLES.get(path)
    if examples:
        command.epilog = "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in examples)
    return command


def _unit_help(param: click.Parameter) -> None:
    if isinstance(param, click.Option) and isinstance(param.type, Quantity) and \
            param.type.help_suffix not in (param.help or ""):
        param.help = f"{param.help or ''} {param.type.help_suffix}".strip()


# ---- shell completion -------------------------------------------------------------------------------------------

def _complete_profiles(ctx, param, incomplete: str) -> list[click.shell_completion.CompletionItem]:
    from fxprobe.workload.profiles import available
    return [click.shell_completion.CompletionItem(n) for n in available() if n.startswith(incomplete)]


def _complete_scenarios(ctx, param, incomplete: str) -> list[click.shell_completion.CompletionItem]:
    from fxprobe.faults.scenario import scenario_names
    return [click.shell_completion.CompletionItem(n) for n in scenario_names() if n.startswith(incomplete)]


def lab_names() -> list[str]:
    """Labs that have a state folder here (running or left behind)."""
    from fxprobe.lab.vm import STATE, lab_home
    home = lab_home()
    return sorted(p.parent.name for p in home.glob(f"*/{STATE}")) if home.is_dir() else []


def _complete_labs(ctx, param, incomplete: str) -> list[click.shell_completion.CompletionItem]:
    return [click.shell_completion.CompletionItem(n) for n in lab_names() if n.startswith(incomplete)]


# (command path or "*", parameter name) -> completion; parameters keep a completion they declare themselves
COMPLETIONS = {
    ("run", "name"): _complete_profiles, ("sweep", "name"): _complete_profiles, ("soak", "profile"): _complete_profiles,
    ("profile show", "name"): _complete_profiles, ("profile gen", "name"): _complete_profiles,
    ("fault run", "scenario"): _complete_scenarios,
}


def _completion(param: click.Parameter, path: str) -> None:
    if getattr(param, "_custom_shell_complete", None) is not None:
        return
    function = COMPLETIONS.get((path, param.name))
    if function is None and "--lab" in param.opts:
        function = _complete_labs
    if function is not None:
        param._custom_shell_complete = function


# ---- renamed options --------------------------------------------------------------------------------------------

def command_path(group: click.Group, ctx: click.Context, args: list[str]) -> str:
    """The command path that ``args`` (after the top-level command name) select inside ``group``."""
    names: list[str] = []
    current = group
    for token in args:
        if not isinstance(current, click.Group) or token.startswith("-"):
            break
        sub = current.get_command(ctx, token)
        if sub is None:
            break
        names.append(token)
        current = sub
    return " ".join(names)


def renames_for(path: str) -> dict[str, str]:
    words = path.split()
    found: dict[str, str] = {}
    for depth in range(1, len(words) + 1):
        found.update(DEPRECATED.get(" ".join(words[:depth]), {}))
    return found


def rewrite_deprecated(path: str, args: list[str], warn=None) -> list[str]:
    """``args`` with every old spelling replaced by the new one (one stderr line each); stops at ``--``."""
    renames = renames_for(path)
    if not renames:
        return args
    warn = warn or (lambda text: click.echo(text, err=True))
    out: list[str] = []
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            out += [token, *tokens]
            break
        old, eq, value = token.partition("=")
        if old not in renames:
            out.append(token)
            continue
        new = renames[old]
        warn(f"fxprobe {path}: {old} is deprecated, use {new} (the old spelling goes in the next release)")
        unit = OLD_BARE_UNIT.get((path.split()[0], old))
        if unit is not None:
            given = value if eq else next(tokens, "")
            out += [new, _with_unit(given, unit)]
        else:
            out.append(new + (eq + value if eq else ""))
    return out


def _with_unit(value: str, unit: str) -> str:
    try:
        float(value)
    except ValueError:
        return value
    return value + unit


def profile_gen_output(args: list[str], warn=None) -> list[str]:
    """``profile gen NAME -o FILE`` (the old meaning of -o there) is ``--out FILE``, said once on stderr."""
    warn = warn or (lambda text: click.echo(text, err=True))
    out = list(args)
    for i, token in enumerate(out[:-1]):
        if token == "-o" and out[i + 1] not in OUTPUT_FORMATS:
            warn("fxprobe profile gen: -o FILE is deprecated, use --out FILE (-o is the output format, as in "
                 "nvme-cli)")
            out[i] = "--out"
    return out


def _own_options_end(command: click.Command, args: list[str]) -> int:
    """Where a command that takes no options after its first argument (``lab exec GUEST ARGV...``) stops
    reading options: what follows is someone else's command line."""
    if getattr(command, "allow_interspersed_args", True):
        return len(args)
    takes_value = {o for p in command.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in takes_value else 1
    return i


def rewrite(group: click.Group, ctx: click.Context, name: str, args: list[str]) -> list[str]:
    """The arguments of top-level command ``name`` with old spellings rewritten."""
    inner = command_path(group.get_command(ctx, name), ctx, args)
    path = " ".join(p for p in (name, inner) if p)
    leaf = group.get_command(ctx, name)
    for word in inner.split():
        leaf = leaf.get_command(ctx, word)
    skip = len(inner.split())
    end = skip + _own_options_end(leaf, args[skip:])
    own = profile_gen_output(args[:end]) if path == "profile gen" else args[:end]
    return rewrite_deprecated(path, own) + args[end:]
