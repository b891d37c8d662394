"""Every help text of `latchkey` and `latchkeyd` reads well at 80 columns: the help of every command and
subcommand, rendered by the built binaries with COLUMNS=80, has no line longer than 80 columns and no sentence
broken by a hard line break.

ArgumentParser wraps the text of an abstract, a discussion or an option's help itself, greedily, to the
terminal's width. A newline written inside a sentence in the source survives that wrapping as a short line
followed by the rest of the sentence, whose first word would have fitted on the short line: that is what the
check looks for. Lists keep their line starts: the lines under a line that ends with a colon and that are
indented deeper than it (the examples under "Examples:") are left alone, and so is a break after the end of a
sentence."""

import os
import re
import subprocess

import pytest

from conftest import binary

WIDTH = 80
# A section heading of ArgumentParser's help: "OVERVIEW: ...", "USAGE: ...", "OPTIONS:", "ARGUMENTS:", ...
HEADING = re.compile(r"^([A-Z][A-Z ]*[A-Z]):")
# The sections whose rows are entries (an option, an argument, a subcommand) at the start of a line, each
# with its help text in a column to the right; a line at the entries' indentation starts the next entry.
ENTRY_SECTIONS = ("ARGUMENTS", "OPTIONS", "SUBCOMMANDS")
# What may end a line without breaking a sentence: a sentence's end (also inside a closing quote or bracket)
# or a colon that introduces what follows.
SENTENCE_END = re.compile(r"[.!?:][\"')\]]*$")


def render(program, *command):
    """The help of `program command...`, as a terminal 80 columns wide would show it."""
    env = dict(os.environ, COLUMNS=str(WIDTH))
    result = subprocess.run([binary(program), *command, "--help"], env=env, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, f"{program} {' '.join(command)} --help exited {result.returncode}: " \
                                   f"{result.stderr}"
    return result.stdout


def subcommands(help_text):
    """The subcommand names listed in the SUBCOMMANDS section of a help text."""
    names = []
    section = None
    for line in help_text.splitlines():
        heading = HEADING.match(line)
        if heading:
            section = heading.group(1)
            continue
        entry = re.match(r"^  ([a-z][a-z0-9-]*)( |$)", line)
        if section == "SUBCOMMANDS" and entry:
            names.append(entry.group(1))
        elif section == "SUBCOMMANDS" and not line.strip():
            section = None  # "See '... help <subcommand>'" follows the list
    return names


def every_command(program):
    """Every command path of `program`: () for the program itself, then each subcommand's, depth first."""
    paths = [()]
    index = 0
    while index < len(paths):
        path = paths[index]
        index += 1
        assert len(path) < 4, f"{program}: subcommands nested too deep to be real: {path}"
        paths.extend(path + (name,) for name in subcommands(render(program, *path)) if name != "help")
    return paths


def indent(line):
    return len(line) - len(line.lstrip(" "))


def text_start(line, column):
    """Where the wrapped text of `line` starts, if a continuation line at `column` can continue it: the line's
    own indentation, or `column` itself when an entry's label sits before it (an option row)."""
    if indent(line) == column:
        return column
    if len(line) > column and line[column] != " " and line[column - 2:column] == "  ":
        return column
    return None


def hard_breaks(help_text):
    """The places where a line ends inside a sentence although the next line's first word would have fitted
    on it, and the lines of a list that were too long to keep their line start: (line number, the line, the
    next line)."""
    found = []
    lines = help_text.splitlines()
    section = None
    list_level = None  # the indentation of the line that introduced the list being read, if any
    for number, (line, following) in enumerate(zip(lines, lines[1:]), start=1):
        heading = HEADING.match(line)
        if heading:
            section = heading.group(1)
        if not line.strip():
            list_level = None
            continue
        if section in ENTRY_SECTIONS:
            list_level = None  # entries are laid out by ArgumentParser, not lists of the text
        elif line.rstrip().endswith(":"):
            list_level = indent(line)
        elif list_level is not None and indent(line) <= list_level:
            list_level = None
        if not following.strip():
            continue
        column = indent(following)
        if list_level is not None and indent(line) > list_level >= column:
            # A list's line that ArgumentParser had to wrap (longer than the width): its rest starts the next
            # line at the left margin, where it reads as prose.
            found.append((number, line, following))
            continue
        if list_level is not None and column > list_level:
            continue  # an item of a list (an example under "Examples:")
        if section in ENTRY_SECTIONS and column <= 2:
            continue  # the next entry
        if text_start(line, column) is None:
            continue  # not the same run of text
        if SENTENCE_END.search(line.rstrip()):
            continue
        word = following.split()[0]
        if len(line.rstrip()) + 1 + len(word) <= WIDTH - 2:
            found.append((number, line, following))
    return found


def long_lines(help_text):
    return [(number, line) for number, line in enumerate(help_text.splitlines(), start=1) if len(line) > WIDTH]


def check(program, path):
    text = render(program, *path)
    where = " ".join((program,) + path) + " --help"
    problems = [f"{where}, line {number}: {len(line)} columns, more than {WIDTH}:\n  {line}"
                for number, line in long_lines(text)]
    problems += [f"{where}, line {number}: a hard line break inside a sentence (the next word fits on the line;"
                 f" join the lines in the source and let ArgumentParser wrap), or a list line too long to keep its"
                 f" line start:\n  {line}\n  {following}"
                 for number, line, following in hard_breaks(text)]
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_sentence_broken_by_a_hard_line_break():
    """The check, on the text `latchkey help` showed before its overview was rewritten, finds the break
    inside "(the login keychain unless default-keychain -s chose another) or on the keychain named last"."""
    before = "\n".join([
        "OVERVIEW: Manage keychains and their items, as macOS security(1) does.",
        "",
        "Verbs work on the default keychain (the login keychain unless default-keychain",
        "-s chose another)",
        "or on the keychain named last. When latchkeyd holds that keychain, the command",
        "asks it; otherwise",
        "it opens the file itself and asks for the keychain's password (on the terminal,",
        "else through",
        "pinentry). Exit status: 0 on success, 44 when no item matches, 1 otherwise.",
        "Secrets never need to be on the command line: put -w last to be asked, or use",
        "--stdin.",
        "",
        "USAGE: latchkey <subcommand>",
    ])
    assert [number for number, _, _ in hard_breaks(before)] == [4, 6, 8]
    assert hard_breaks("Examples:\n  latchkey list-access\n  latchkey list-access --json work\n") == []
    assert [number for number, _, _ in hard_breaks("Examples:\n  latchkey list-access --json\nwork\n")] == [2]
    options = "OPTIONS:\n  -s <name>               Only items of this service or\n" \
              "                          server.\n  -a <account>            Only items of this account.\n"
    assert [number for number, _, _ in hard_breaks(options)] == [2]
    colon = "OPTIONS:\n  --stdin                 Read the secrets from standard input, one per line:\n" \
            "                          the password, then the PIN.\n  --version               Show the version.\n"
    assert hard_breaks(colon) == []
    assert long_lines("x" * 81) == [(1, "x" * 81)]


@pytest.mark.parametrize("program", ["latchkey", "latchkeyd"])
def test_every_help_text_reads_well_at_80_columns(program):
    paths = every_command(program)
    if program == "latchkey":
        assert len(paths) > 20, f"latchkey's subcommands were not found: {paths}"
    failures = []
    for path in paths:
        try:
            check(program, path)
        except AssertionError as error:
            failures.append(str(error))
    assert not failures, "\n\n".join(failures)
