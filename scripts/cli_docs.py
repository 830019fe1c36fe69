#!/usr/bin/env python3
"""The man page and the bash completion of polymargin, generated from the program's own --help.

usage: scripts/cli_docs.py POLYMARGIN OUTDIR

Runs `POLYMARGIN --help`, `POLYMARGIN CMD --help` for each command it lists and `POLYMARGIN train
--algo NAME --help` for each learner, parses the option tables that Boost.Program_options prints
(and train's tuning table), and writes OUTDIR/polymargin.1.gz (man(7), UTF-8) and
OUTDIR/polymargin.bash (a bash completion). Nothing is written by hand: an option added to a
command appears in both at the next build. The build runs this (cmake/install.cmake); the install
test (tests/install/install.sh) reads what it wrote.
"""

import gzip
import os
import re
import subprocess
import sys

# "  -d [ --data ] arg (=x)   text", "  --json   text", "  --tune-folds K   text" (train's tuning).
OPTION = re.compile(r"^  (?:-(?P<short>\w) \[ )?--(?P<long>[a-z0-9][a-z0-9-]*)(?: \])?"
                    r"(?P<arg> arg| [A-Z]+)?(?: \(=(?P<default>[^)]*)\))?(?:\s{2,}(?P<text>.*))?$")
# A learner of train's list: "  ldm     Large Margin ...".
LEARNER = re.compile(r"^  (?P<name>[a-z]+)\s{2,}(?P<text>.*)$")
# The values an option's text lists as "A | B | C", each perhaps followed by what it means: "zstd |
# raw", "auto | 0 | 1: ...", "maxabs: divide ... | none", "output compression: none | zstd | gzip
# (adds ...)", "double (D = F+ - F-) | outer=+1 (...) | outer=-1".
FIRST_CHOICE = re.compile(r"^(?:[\w ]+: )?([\w.+=-]+)(?=$|:| \()")
NEXT_CHOICE = re.compile(r"^([\w.+=-]+)(?=$|:| \()")


def run(binary, *args):
    out = subprocess.run([binary, *args], capture_output=True, text=True, check=True)
    return out.stdout


class Option:
    def __init__(self, match):
        self.short = match["short"]
        self.long = match["long"]
        arg = match["arg"]
        self.metavar = None if arg is None else ("ARG" if arg == " arg" else arg.strip())
        self.default = match["default"]
        self.lines = [match["text"] or ""]

    @property
    def text(self):
        return " ".join(part.strip() for part in self.lines if part.strip())

    def key(self):
        return (self.short, self.long, self.metavar, self.default, self.text)

    def choices(self):
        pieces = self.text.split(" | ")
        if not self.metavar or len(pieces) < 2:
            return []
        found = [FIRST_CHOICE.match(pieces[0])] + [NEXT_CHOICE.match(p) for p in pieces[1:]]
        return [m.group(1) for m in found] if all(found) else []


def parse_help(text):
    """[(heading, [Option] or [str])] in the order printed; the usage line under heading 'usage'."""
    sections = []
    current = None
    for line in text.splitlines():
        if not line.strip():
            current = None if current is None or current[1] else current
            continue
        if line.startswith("usage:"):
            sections.append(("usage", [line[len("usage:"):].strip()]))
            current = None
            continue
        if not line.startswith(" "):
            if line.endswith(":"):
                current = (line[:-1], [])
                sections.append(current)
            else:  # a paragraph of prose (the CPM's memory note), kept as text
                if current is None or current[0] != "":
                    current = ("", [])
                    sections.append(current)
                current[1].append(line)
            continue
        if current is None:
            current = ("", [])
            sections.append(current)
        m = OPTION.match(line)
        items = current[1]
        if m:
            items.append(Option(m))
        elif items and isinstance(items[-1], Option) and line.startswith("    "):
            items[-1].lines.append(line)
        else:
            items.append(line)
    return sections


def options_of(sections):
    return [o for _, items in sections for o in items if isinstance(o, Option)]


def collect(binary):
    main = run(binary, "--help")
    commands = []  # (name, summary)
    exit_codes = []
    state = None
    for line in main.splitlines():
        if line == "commands:":
            state = "commands"
        elif line.startswith("exit codes:"):
            state = "exit"
            exit_codes.append(line[len("exit codes:"):].strip())
        elif state == "commands" and line.startswith("  "):
            name, summary = line.strip().split(None, 1)
            commands.append((name, summary.strip()))
        elif state == "exit" and line.strip():
            exit_codes.append(line.strip())
    helps = {name: parse_help(run(binary, name, "--help")) for name, _ in commands}
    learners = []
    tuning = None
    for heading, items in helps.get("train", []):
        if heading == "learners (--algo)":
            learners = [(m["name"], m["text"]) for m in map(LEARNER.match, items) if m]
        elif heading.startswith("tuning (--algo "):
            tuning = (heading, items)
    algos = {name: parse_help(run(binary, "train", "--algo", name, "--help"))
             for name, _ in learners}
    version = run(binary, "--version").split()[-1]
    return dict(commands=commands, exit_codes=" ".join(exit_codes), helps=helps,
                learners=learners, algos=algos, tuning=tuning, version=version)


# ---------------------------------------------------------------------------------- man page --

def roff(text):
    """Escapes text for a man(7) line: backslashes, hyphens, and a leading dot or quote."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text[:1] in (".", "'"):
        text = "\\&" + text
    return text


def option_head(o):
    parts = []
    if o.short:
        parts.append(f"\\fB\\-{o.short}\\fR, ")
    parts.append(f"\\fB\\-\\-{roff(o.long)}\\fR")
    if o.metavar:
        parts.append(f" \\fI{o.metavar}\\fR")
    if o.default is not None:
        parts.append(f" (default: {roff(o.default)})")
    return "".join(parts)


def man_options(opts):
    out = []
    for o in opts:
        out += [".TP", option_head(o), roff(o.text)]
    return out


def man_prose(items):
    lines = [i.strip() if isinstance(i, str) else "" for i in items]
    return [".PP", roff(" ".join(x for x in lines if x))]


def man_preformatted(items):
    return [".PP", ".nf"] + [roff(i) for i in items if isinstance(i, str)] + [".fi"]


COMMON = "Common options"


def man_page(d):
    out = [
        '.\\" -*- coding: UTF-8 -*-',
        f'.\\" Generated by scripts/cli_docs.py from the --help of polymargin {d["version"]}.'
        " Do not edit.",
        f'.TH POLYMARGIN 1 "" "polymargin {d["version"]}" "User Commands"',
        ".SH NAME",
        "polymargin \\- out\\-of\\-core streaming trainer for large\\-margin classifiers",
        ".SH SYNOPSIS",
        ".B polymargin",
        ".I command",
        "[\\fIoptions\\fR]",
        ".br",
        ".B polymargin",
        "\\fIcommand\\fR \\fB\\-\\-help\\fR | \\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR",
        ".SH DESCRIPTION",
        "One program, several commands:",
    ]
    for name, summary in d["commands"]:
        out += [".TP", f"\\fB{name}\\fR", roff(summary)]
    common = None
    for name, _ in d["commands"]:
        sections = d["helps"][name]
        out += [".SH " + f'"{name.upper()}"']
        if name == "train":
            out += man_train(d)
            continue
        for heading, items in sections:
            if heading == "usage":
                out += [".PP", ".B " + roff(items[0])]
            elif heading == COMMON:
                common = [o for o in items if isinstance(o, Option)]
            elif heading == "":
                out += man_prose(items)
            else:
                out += [".SS " + f'"{roff(heading)}"'] + man_options(
                    [o for o in items if isinstance(o, Option)])
    if common:
        out += [".SH COMMON OPTIONS", "Every command takes:"] + man_options(common)
    out += [".SH EXIT STATUS", roff(d["exit_codes"])]
    out += [".SH SEE ALSO",
            "The README and docs/ of the source tree (reference.md: every command in detail)."]
    return "\n".join(out) + "\n"


def man_train(d):
    """train: the options every learner shares once, then each learner's own, then tuning."""
    out = []
    per_algo = {}
    for name, _ in d["learners"]:
        sections = d["algos"][name]
        per_algo[name] = [o for heading, items in sections if heading not in (COMMON, "usage")
                          and not heading.startswith("tuning") for o in items
                          if isinstance(o, Option) and o.long != "algo"]
    shared = None
    for opts in per_algo.values():
        keys = {o.key() for o in opts}
        shared = keys if shared is None else shared & keys
    first = next(iter(per_algo.values()), [])
    out += [".PP", ".B " + roff("polymargin train --algo NAME -d TRAIN... -o MODEL [options]")]
    default = next((o.default for o in options_of(d["helps"]["train"]) if o.long == "algo"), None)
    out += [".SS Learners", ".TP", "\\fB\\-\\-algo\\fR \\fINAME\\fR"
            + (f" (default: {roff(default)})" if default else ""),
            "the learner: each takes the options of every learner and its own (below)", ".RS"]
    for name, text in d["learners"]:
        out += [".TP", f"\\fB{name}\\fR", roff(text)]
    out += [".RE"]
    out += [".SS Options of every learner"] + man_options(
        [o for o in first if o.key() in shared])
    for name, _ in d["learners"]:
        sections = d["algos"][name]
        out += [".SS " + f'"train \\-\\-algo {name}"']
        for heading, items in sections:
            if heading == "usage":
                out += [".PP", ".B " + roff(items[0])]
            elif heading == "":
                out += man_prose(items)
            else:  # the prose after the options (how to see a learner's) is the train's own
                break
        own = [o for o in per_algo[name] if o.key() not in shared]
        out += man_options(own)
    if d["tuning"]:
        heading, items = d["tuning"]
        opts = [o for o in items if isinstance(o, Option)]
        grids = [i for i in items if isinstance(i, str)]
        out += [".SS " + f'"{roff(heading[0].upper() + heading[1:])}"'] + man_options(opts)
        out += man_preformatted(grids)
    return out


# -------------------------------------------------------------------------------- completion --

def words(opts):
    out = []
    for o in opts:
        if o.short:
            out.append("-" + o.short)
        out.append("--" + o.long)
    return " ".join(out)


def valued(opts):
    return [o for o in opts if o.metavar]


def completion(d):
    helps, algos = d["helps"], d["algos"]
    learner_names = [n for n, _ in d["learners"]]
    tuning_opts, tuned = [], []
    if d["tuning"]:
        heading, items = d["tuning"]
        tuning_opts = [o for o in items if isinstance(o, Option)]
        tuned = heading[len("tuning (--algo "):-1].split("|")

    def command_opts(name):
        return options_of(helps[name])

    out = [
        "# bash completion for polymargin "
        f"{d['version']}: generated by scripts/cli_docs.py from the program's --help. Do not edit.",
        "",
        "# The options of COMMAND (train: of the learner ALGO), one word each.",
        "_polymargin_options() {",
        '  case "$1" in',
    ]
    for name, _ in d["commands"]:
        if name == "train":
            continue
        out.append(f'    {name}) echo "{words(command_opts(name))}" ;;')
    out.append('    train)\n      case "$2" in')
    for algo in learner_names:
        opts = options_of(algos[algo])
        if algo in tuned:
            opts = [o for o in opts if o.long not in {t.long for t in tuning_opts}] + tuning_opts
        out.append(f'        {algo}) echo "{words(opts)}" ;;')
    out += ["      esac ;;", "  esac", "}", ""]

    # Options that take a value, and the values that some take.
    all_opts = [o for n, _ in d["commands"] for o in command_opts(n)]
    all_opts += [o for a in learner_names for o in options_of(algos[a])] + tuning_opts
    taking = sorted({f for o in valued(all_opts) for f in
                     (["-" + o.short] if o.short else []) + ["--" + o.long]})
    out += ["# The options that take a value (the next word).",
            "_polymargin_takes_value() {",
            '  case "$1" in',
            "    " + "|".join(taking) + ") return 0 ;;",
            "  esac",
            "  return 1",
            "}",
            "",
            "# The values of COMMAND's option that has a list of them (else nothing: file names).",
            "_polymargin_values() {",
            '  case "$1 $2" in',
            f'    "train --algo") echo "{" ".join(learner_names)}" ;;']
    choices = {}
    per_command = [(n, command_opts(n)) for n, _ in d["commands"] if n != "train"]
    per_command += [("train", [o for a in learner_names for o in options_of(algos[a])])]
    for command, opts in per_command:
        for o in valued(opts):
            if o.long == "algo":
                continue
            values = choices.setdefault((command, o.long), [])
            values += [v for v in o.choices() if v not in values]
    for (command, flag), values in sorted(choices.items()):
        if values:
            out.append(f'    "{command} --{flag}") echo "{" ".join(values)}" ;;')
    out += ["  esac", "}", ""]

    commands = " ".join(n for n, _ in d["commands"])
    out += [
        "_polymargin() {",
        "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}",
        "  COMPREPLY=()",
        "  if [[ $COMP_CWORD -eq 1 ]]; then",
        f'    COMPREPLY=($(compgen -W "{commands} --help --version" -- "$cur"))',
        "    return",
        "  fi",
        "  local command=${COMP_WORDS[1]} algo=ldm i",
        "  for ((i = 2; i < COMP_CWORD; i++)); do",
        '    [[ ${COMP_WORDS[i]} == --algo ]] && algo=${COMP_WORDS[i+1]}',
        '    [[ ${COMP_WORDS[i]} == --algo=* ]] && algo=${COMP_WORDS[i]#--algo=}',
        "  done",
        '  if _polymargin_takes_value "$prev"; then',
        '    local values; values=$(_polymargin_values "$command" "$prev")',
        '    if [[ -n $values ]]; then',
        '      COMPREPLY=($(compgen -W "$values" -- "$cur"))',
        "    else",
        '      COMPREPLY=($(compgen -f -- "$cur"))',
        "    fi",
        "    return",
        "  fi",
        '  if [[ $cur == -* ]]; then',
        '    COMPREPLY=($(compgen -W "$(_polymargin_options "$command" "$algo")" -- "$cur"))',
        "  else",
        '    COMPREPLY=($(compgen -f -- "$cur"))',
        "  fi",
        "}",
        "complete -o filenames -F _polymargin polymargin",
    ]
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    binary, outdir = sys.argv[1], sys.argv[2]
    d = collect(binary)
    if not d["commands"] or "train" not in d["helps"] or not d["learners"]:
        sys.exit(f"cli_docs.py: no commands or learners in the help of {binary}")
    os.makedirs(outdir, exist_ok=True)
    page = man_page(d).encode("utf-8")
    # mtime 0 and no name: the same bytes at every build.
    with open(os.path.join(outdir, "polymargin.1.gz"), "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
            f.write(page)
    with open(os.path.join(outdir, "polymargin.bash"), "w", encoding="utf-8") as f:
        f.write(completion(d))


if __name__ == "__main__":
    main()
