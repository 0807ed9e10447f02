#!/usr/bin/env python3
"""The programs the roles execute, found in the code (src/, roles/): prints one line per
program, "NAME FILE:LINE[,FILE:LINE...]".

src/base/exec.c's exec_run is the one exec layer.  The scan finds, to a fixed point, every
function that hands an argument vector on to it (a wrapper: a parameter of type
`const char *const` array/pointer passed to exec_run or to another wrapper).  Then at every call
of exec_run or a wrapper it reads which vector is passed and where that vector's argv[0] comes
from: the first element of a NULL-terminated brace initializer (a string literal, or a local
`const char *NAME = "literal"`), or the literal stored first into a calloc'ed vector in each
block (`argv[n++] = "zfs";` - later stores in the same block are arguments).  A call whose vector
or argv[0] the scan cannot trace is an error (exit 1, "cannot tell what FILE:LINE executes"),
so a new exec'd program is either listed here or fails the test until the scan understands it.
Usage: programs.py [ROOT]   (ROOT: the repository, default: two levels above this file)
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
EXEC_LAYER = os.path.join("src", "base", "exec.c")
IDENT = r"[A-Za-z_]\w*"


def strip_comments(text):
    """Comments and preprocessor lines become spaces (newlines kept); strings stay."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), "".join(out))


def match_close(text, i, open_c, close_c):
    """Index just past the bracket that closes the one at text[i]; strings skipped."""
    depth, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced")


def split_top(s):
    """Split on commas outside (), {}, [] and strings."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        if c in "\"'":
            j = i + 1
            while j < len(s) and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            cur.append(s[i : j + 1])
            i = j + 1
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def functions(text):
    """(name, params, body, body_offset, is_static) of each function definition at file level."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == "{":
            # the function head: NAME(PARAMS) right before this brace
            m = None
            for m in re.finditer(r"(" + IDENT + r")\s*\(([^;{}()]*(\([^()]*\)[^;{}()]*)*)\)\s*$", text[max(0, i - 600) : i]):
                pass
            end = match_close(text, i, "{", "}")
            if m and not re.search(r"=\s*$", text[max(0, i - 5) : i]):
                window = text[max(0, i - 600) : i]
                head = re.split(r"[;}]|^#.*$", window[: m.start(1)], flags=re.M)[-1]
                static = re.search(r"\bstatic\b", head) is not None
                out.append((m.group(1), m.group(2), text[i:end], i, static))
            i = end
            continue
        i += 1
    return out


def line_of(text, off):
    return text.count("\n", 0, off) + 1


def vector_param(params):
    """Index of the argument-vector parameter (`const char *const NAME[]` / `*const *NAME`)."""
    for k, p in enumerate(split_top(params)):
        if re.search(r"char\s*\*\s*const\s*(\*\s*" + IDENT + r"|" + IDENT + r"\s*\[\s*\])\s*$", p):
            return k, re.findall(IDENT, p)[-1]
    return None


def calls(body, names):
    """(name, args list, offset) of each call of one of names in body."""
    for m in re.finditer(r"\b(" + "|".join(map(re.escape, names)) + r")\s*\(", body):
        start = m.end() - 1
        try:
            end = match_close(body, start, "(", ")")
        except ValueError:
            continue
        yield m.group(1), split_top(body[start + 1 : end - 1]), m.start()


def literal(s):
    m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', s.strip())
    return m.group(1) if m else None


def brace_vectors(body):
    """{var: [(argv0 expression, offset)...]} of NULL-terminated brace-initialized vectors (one
    name may be declared in several blocks of a function: all of them count)."""
    out = {}
    for m in re.finditer(r"(?:\*\s*const\s+|\*\s*)(" + IDENT + r")\s*\[\s*\]\s*=\s*\{", body):
        end = match_close(body, m.end() - 1, "{", "}")
        elems = split_top(body[m.end() : end - 1])
        if elems and elems[-1] == "NULL":
            out.setdefault(m.group(1), []).append((elems[0], m.start()))
    return out


def dynamic_vectors(body, var):
    """argv[0] literals of a vector filled element by element: the first literal stored into var
    in each block, when no store into var came before it in that block or an enclosing one."""
    found, stack, i = [], [False], 0
    store = re.compile(r"\b" + re.escape(var) + r"\s*\[[^\]]*\]\s*=\s*(\"(?:[^\"\\]|\\.)*\"|[^;]+);")
    while i < len(body):
        c = body[i]
        if c == '"':
            j = i + 1
            while body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            stack.append(stack[-1])
        elif c == "}":
            stack.pop()
        m = store.match(body, i)
        if m and (i == 0 or not re.match(r"\w", body[i - 1])):
            lit = literal(m.group(1))
            if not stack[-1] and lit is not None:
                found.append((lit, i))
            stack[-1] = True
            i = m.end()
            continue
        i += 1
    return found


def main():
    files = {}
    for top in ("src", "roles"):
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            for f in sorted(names):
                p = os.path.join(d, f)
                if f.endswith(".c") and os.path.relpath(p, ROOT) != EXEC_LAYER:
                    with open(p, encoding="utf-8") as fh:
                        files[os.path.relpath(p, ROOT)] = strip_comments(fh.read())
    funcs = {p: functions(t) for p, t in files.items()}
    # (scope, name) -> index of its vector argument; scope is the defining file for a static
    # function (visible only there: two files may each have their own static `run`), else None.
    wrappers = {(None, "exec_run"): 0}

    def visible(path):
        """name -> vector index of the wrappers a function in path can call."""
        vis = {n: k for (sc, n), k in wrappers.items() if sc is None}
        vis.update({n: k for (sc, n), k in wrappers.items() if sc == path})
        return vis

    changed = True
    while changed:
        changed = False
        for path, fl in funcs.items():
            for name, params, body, _, static in fl:
                key = (path if static else None, name)
                vp = vector_param(params)
                if key in wrappers or not vp:
                    continue
                vis = visible(path)
                if any(args[vis[c]] == vp[1] for c, args, _ in calls(body, list(vis)) if len(args) > vis[c]):
                    wrappers[key] = vp[0]
                    changed = True
    programs, errors = {}, []
    for path, fl in sorted(funcs.items()):
        text = files[path]
        vis = visible(path)
        for name, params, body, boff, _ in fl:
            vp = vector_param(params)
            braces = brace_vectors(body)
            for callee, args, off in calls(body, list(vis)):
                where = "%s:%d" % (path, line_of(text, boff + off))
                if name == callee or len(args) <= vis[callee]:
                    continue
                arg = re.sub(r"^\([^()]*\)\s*", "", args[vis[callee]])
                if name in vis and vp and arg == vp[1]:
                    continue  # a wrapper passing its own vector on
                if not re.fullmatch(IDENT, arg):
                    errors.append("cannot tell what %s executes: vector %r" % (where, arg))
                    continue
                if arg in braces:
                    for first, voff in braces[arg]:
                        lit = literal(first)
                        if lit is None and re.fullmatch(IDENT, first):
                            m = re.search(r"\b" + re.escape(first) + r"\s*=\s*(\"(?:[^\"\\]|\\.)*\")\s*;", body)
                            lit = literal(m.group(1)) if m else None
                        if lit is None:
                            errors.append("cannot tell what %s executes: argv[0] %r" % (where, first))
                        else:
                            programs.setdefault(lit, set()).add("%s:%d" % (path, line_of(text, boff + voff)))
                    continue
                dyn = dynamic_vectors(body, arg)
                if not dyn:
                    errors.append("cannot tell what %s executes: vector %r" % (where, arg))
                for lit, voff in dyn:
                    programs.setdefault(lit, set()).add("%s:%d" % (path, line_of(text, boff + voff)))
    for e in errors:
        print("programs.py: " + e, file=sys.stderr)
    for prog in sorted(programs):
        print(prog, ",".join(sorted(programs[prog])))
    if errors or not programs:
        sys.exit(1)


if __name__ == "__main__":
    main()
