"""What programs do with their arguments, as the pinned digest must know it: the shells
whose `-c` string is a command, the commands that change the directory or a search path,
the programs that run a string, code given on an interpreter's command line, and the ones
that run what repository files say by convention (shell/syntax.py applies them).
"""

from __future__ import annotations

import re

#: shells whose `-c STRING` is a command line of its own
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})

#: commands that change the directory the rest of the line is read in
CHANGES_DIRECTORY = frozenset({"cd", "pushd", "popd", "chdir"})
#: programs whose `-C DIR` runs them in another directory
DASH_C_DIRECTORY = frozenset({"env", "git", "make", "gmake", "ninja", "tar", "bmake"})
#: options that run a program in another directory, whatever the program
DIRECTORY_OPTIONS = ("--chdir", "--directory", "--cwd", "--working-directory", "--workdir",
                     "--prefix", "--cd")  # fmt: skip
#: variables whose value decides where a program, a script or a module is looked up, or
#: names a file a shell or interpreter runs first
SEARCH_VARIABLES = frozenset({
    "PATH", "CDPATH", "HOME", "PWD", "OLDPWD", "BASH_ENV", "ENV", "PYTHONPATH",
    "PYTHONSTARTUP", "PYTHONHOME", "NODE_PATH", "NODE_OPTIONS", "PERL5LIB", "PERL5OPT",
    "RUBYLIB", "RUBYOPT", "LD_PRELOAD", "LD_LIBRARY_PATH", "GIT_DIR", "GIT_WORK_TREE",
    "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "IFS",
})  # fmt: skip

#: programs that run a command string given as an argument (not as a path)
RUNS_ITS_STRING = frozenset({
    "alias", "xargs", "fc", "trap", "enable", "hash", "watch", "su", "runuser", "flock",
    "script", "parallel", "entr", "nodemon", "osascript", "expect", "tclsh", "wish", "at",
    "batch", "crontab",
})  # fmt: skip
#: interpreters and the options after which their argument is code, not a file
INLINE_CODE = {
    "python": ("-c",),
    "pypy": ("-c",),
    "node": ("-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader",
             "--experimental-loader"),
    "nodejs": ("-e", "--eval", "-p", "--print", "-r", "--require", "--import"),
    "bun": ("-e", "--eval", "-p", "--print", "-r", "--preload"),
    "deno": ("eval",),
    "perl": ("-e", "-E", "-M", "-m"),
    "ruby": ("-e", "-r"),
    "php": ("-r", "-B", "-R", "-E"),
    "lua": ("-e", "-l"),
    "luajit": ("-e", "-l"),
    "Rscript": ("-e",),
}  # fmt: skip
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
#: awk runs a command through system(), a pipe to or from a string, or `getline`
AWK_RUNS = re.compile(r"system\s*\(|\||getline")
#: sed's `e` command and `s///e` flag run a command
SED_RUNS = re.compile(
    r"(?:^|[;\n{}])\s*(?:(?:\d+|\$|/[^/]*/)(?:\s*,\s*(?:\d+|\$|/[^/]*/))?)?\s*!?\s*e(?:\s|$|;)"
    r"|s(.)(?:(?!\1).|\\.)*\1(?:(?!\1).|\\.)*\1[a-zA-Z0-9]*e"
)

#: programs that run what files they find in the repository say, not files the command
#: names: a Makefile, package.json's scripts, test files, a build file, a task file
READS_BY_CONVENTION = frozenset({
    "make", "gmake", "bmake", "npm", "yarn", "pnpm", "bun", "npx", "pnpx", "bunx", "deno",
    "just", "task", "rake", "tox", "nox", "pytest", "py.test", "cargo", "go", "gradle",
    "gradlew", "mvn", "mvnw", "poetry", "uv", "pipenv", "pre-commit", "composer", "invoke",
    "bundle", "ant", "sbt", "mix", "dotnet", "cmake", "ninja", "meson", "bazel", "buck",
    "lefthook", "husky", "turbo", "nx", "lerna", "jest", "vitest", "mocha", "phpunit",
})  # fmt: skip

#: of those, the ones that run a file when given its path (`bun x.ts`, `deno run x.ts`)
RUNS_A_NAMED_FILE = frozenset({"bun", "deno", "uv", "go", "poetry", "pipenv", "dotnet"})
SCRIPT_SUFFIXES = (".ts", ".tsx", ".js", ".mjs", ".cjs", ".py", ".sh", ".go", ".cs", ".rb")
