"""A small evaluator for the subset of CEL our CRDs' x-kubernetes-validations use.

Supported: literals (int, double, string, bool, null, lists), `self`/`oldSelf`, member access,
`has(a.b)`, unary `!`/`-`, `* / % + -`, comparisons, `in`, `&&`, `||`, `?:`, functions and
methods `size`, `matches`, `startsWith`, `endsWith`, `contains`, `isIP`, `isCIDR`.
compile(text) returns an AST or raises CelError; evaluate(ast, env) returns the value or raises
CelError (a runtime error such as a missing key).  `uses_old(ast)` tells transition rules apart.
"""
import ipaddress
import re


class CelError(Exception):
    pass


TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d+|\d+)|(?P<str>'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\")"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%<>!?:.,()\[\]]))"
)


def _tokens(text):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise CelError(f"syntax error at {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        val = m.group(kind)
        if kind == "str":
            val = bytes(val[1:-1], "utf-8").decode("unicode_escape")
        elif kind == "num":
            val = float(val) if "." in val else int(val)
        out.append((kind, val))
    out.append(("end", None))
    return out


BINARY = {
    "||": 1, "&&": 2,
    "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3,
    "+": 4, "-": 4, "*": 5, "/": 5, "%": 5,
}


class _Parser:
    def __init__(self, text):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i]

    def take(self, val=None):
        tok = self.toks[self.i]
        if val is not None and tok[1] != val:
            raise CelError(f"expected {val!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def expr(self):
        cond = self.binary(1)
        if self.peek()[1] == "?":
            self.take()
            a = self.expr()
            self.take(":")
            b = self.expr()
            return ("cond", cond, a, b)
        return cond

    def binary(self, level):
        left = self.unary()
        while True:
            kind, op = self.peek()
            prec = BINARY.get(op) if kind in ("op", "id") else None
            if prec is None or prec < level:
                return left
            self.take()
            right = self.binary(prec + 1)
            left = ("bin", op, left, right)

    def unary(self):
        kind, val = self.peek()
        if kind == "op" and val in ("!", "-"):
            self.take()
            return ("un", val, self.unary())
        return self.postfix(self.primary())

    def args(self):
        self.take("(")
        out = []
        while self.peek()[1] != ")":
            out.append(self.expr())
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return out

    def primary(self):
        kind, val = self.take()
        if kind in ("num", "str"):
            return ("lit", val)
        if kind == "id":
            if val in ("true", "false", "null"):
                return ("lit", {"true": True, "false": False, "null": None}[val])
            if self.peek()[1] == "(":
                return ("call", val, None, self.args())
            return ("var", val)
        if val == "(":
            e = self.expr()
            self.take(")")
            return e
        if val == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.expr())
                if self.peek()[1] == ",":
                    self.take()
            self.take("]")
            return ("list", items)
        raise CelError(f"unexpected {val!r}")

    def postfix(self, node):
        while self.peek()[1] in (".", "["):
            if self.take()[1] == "[":
                idx = self.expr()
                self.take("]")
                node = ("index", node, idx)
                continue
            name = self.take()[1]
            if self.peek()[1] == "(":
                node = ("call", name, node, self.args())
            else:
                node = ("sel", node, name)
        return node


def compile(text):
    p = _Parser(text)
    ast = p.expr()
    if p.peek()[0] != "end":
        raise CelError(f"unexpected {p.peek()[1]!r}")
    return ast


def uses_old(ast):
    if isinstance(ast, tuple):
        if ast[0] == "var":
            return ast[1] == "oldSelf"
        return any(uses_old(a) for a in ast[1:])
    if isinstance(ast, list):
        return any(uses_old(a) for a in ast)
    return False


def _size(v):
    if isinstance(v, (str, list, dict)):
        return len(v)
    raise CelError("no such overload: size")


def _is_ip(s):
    try:
        ipaddress.ip_address(s)
        return "%" not in s
    except ValueError:
        return False


def _is_cidr(s):
    try:
        ipaddress.ip_network(s, strict=False)
        return "/" in s
    except ValueError:
        return False


FUNCS = {
    "size": _size,
    "matches": lambda s, r: re.search(r, s) is not None,
    "startsWith": lambda s, p: s.startswith(p),
    "endsWith": lambda s, p: s.endswith(p),
    "contains": lambda s, p: p in s,
    "isIP": _is_ip,
    "isCIDR": _is_cidr,
}


def _bin(op, a, b):
    if op in ("==", "!="):
        eq = a == b and type(a) is type(b) or (a == b and {type(a), type(b)} <= {int, float})
        return eq if op == "==" else not eq
    if op == "in":
        if isinstance(b, (list, dict)):
            return a in b
        raise CelError("no such overload: in")
    if op in ("+", "-", "*", "/", "%", "<", "<=", ">", ">="):
        if isinstance(a, bool) or isinstance(b, bool):
            raise CelError(f"no such overload: {op}")
        try:
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                return a // b if isinstance(a, int) and isinstance(b, int) else a / b
            if op == "%":
                return a % b
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        except (TypeError, ZeroDivisionError) as e:
            raise CelError(str(e))
    raise CelError(f"unknown operator {op}")


def evaluate(ast, env):
    t = ast[0]
    if t == "lit":
        return ast[1]
    if t == "var":
        if ast[1] not in env:
            raise CelError(f"undeclared reference to '{ast[1]}'")
        return env[ast[1]]
    if t == "list":
        return [evaluate(a, env) for a in ast[1]]
    if t == "sel":
        obj = evaluate(ast[1], env)
        if not isinstance(obj, dict) or ast[2] not in obj:
            raise CelError(f"no such key: {ast[2]}")
        return obj[ast[2]]
    if t == "index":
        obj, idx = evaluate(ast[1], env), evaluate(ast[2], env)
        try:
            return obj[idx]
        except (KeyError, IndexError, TypeError):
            raise CelError(f"no such key: {idx}")
    if t == "un":
        v = evaluate(ast[2], env)
        if ast[1] == "!":
            if not isinstance(v, bool):
                raise CelError("no such overload: !")
            return not v
        return -v
    if t == "cond":
        return evaluate(ast[2] if evaluate(ast[1], env) else ast[3], env)
    if t == "bin":
        op = ast[1]
        if op in ("&&", "||"):
            # CEL's commutative logic: an error on one side is absorbed by a decisive other side.
            try:
                a = evaluate(ast[2], env)
            except CelError:
                a = None
            if a is (op == "||"):
                return a
            b = evaluate(ast[3], env)
            if b is (op == "||") or a is not None:
                return b
            raise CelError("no such key")
        return _bin(op, evaluate(ast[2], env), evaluate(ast[3], env))
    if t == "call":
        name, target, args = ast[1], ast[2], ast[3]
        if name == "has" and target is None:
            sel = args[0]
            if sel[0] != "sel":
                raise CelError("invalid argument to has() macro")
            obj = evaluate(sel[1], env)
            return isinstance(obj, dict) and sel[2] in obj
        vals = [evaluate(a, env) for a in args]
        if target is not None:
            vals.insert(0, evaluate(target, env))
        fn = FUNCS.get(name)
        if fn is None:
            raise CelError(f"undeclared reference to '{name}'")
        try:
            return fn(*vals)
        except (TypeError, AttributeError, re.error) as e:
            raise CelError(str(e))
    raise CelError(f"bad node {t}")
