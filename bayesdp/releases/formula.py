"""Tables in, design out: a formula over the columns of a table, with public bounds per column.

A data holder's table has columns of different scales, some categorical. The holder writes an
R-style formula (``"log(cnt + 1) ~ temp + hum + C(season)"``, parsed by formulaic) and declares,
without looking at the data, a range (lo, hi) for each numeric column the formula uses and the
levels of each categorical one. :class:`TableEncoding` turns every row of the table into a row
(x, y) of the regression, the same way for every holder, every chunk and every new row:

1. each numeric value is clamped to its declared range (and counted); a categorical value must
   be one of the declared levels (otherwise an error names it);
2. the formula is evaluated row by row: its transforms are elementwise (log, exp, sqrt, powers,
   arithmetic with public constants); transforms that learn from the data (formulaic's
   ``center``, ``scale``, ``poly``, splines, ``lag``) are refused, and the levels of ``C(col)``
   are the declared ones, never read off the data (the first declared level is the reference
   level that treatment coding drops when the design has an intercept);
3. the bounds of the encoded row follow from the declared ranges by interval arithmetic
   (:func:`factor_interval`): a numeric factor lies in an interval, so |factor| <= M_f; a term
   (a product of factors) adds at most prod_f M_f^2 to ||x||^2, a categorical factor counting 1
   (in each row exactly one indicator of its block is 1, or none for the reference level). So

       B_x^2 = sum over the terms (but the intercept) of prod over their numeric factors M_f^2,
       B_y = max |y| over the interval of the response,

   and clamping the raw values to their ranges implies ||x|| <= B_x and |y| <= B_y. B_x is the
   largest ||x|| over the box of declared values when each column enters the formula through
   one expression (otherwise an upper bound).

The formula's intercept is the release's ``intercept=True`` (appendix B.2): the encoded row x
holds the other columns, and the release prepends the 1. Everything here is public: the
formula, the declared ranges and levels, and what follows from them (docs/tables.md).
formulaic is imported only when a formula is used.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import numbers
from typing import Optional

import numpy as np

from ..errors import BayesdpInputError

INTERCEPT_TERM = "1"
"""formulaic's name of the intercept term."""
_FORMULAIC_INTERCEPT = "Intercept"
"""formulaic's name of the intercept's column (the release names it "intercept")."""

#: functions a formula may apply to numeric columns: name in the formula -> numpy function.
#: Each is increasing on its domain, so an interval maps to the interval of its endpoints.
_INCREASING = {
    "log": np.log, "log2": np.log2, "log10": np.log10, "exp": np.exp, "exp2": np.exp2,
    "np.log": np.log, "np.log1p": np.log1p, "np.log2": np.log2, "np.log10": np.log10,
    "np.exp": np.exp, "np.expm1": np.expm1, "np.exp2": np.exp2, "np.sqrt": np.sqrt,
}
#: the open (or closed, for sqrt) lower end of each function's domain
_DOMAIN = {"log": (0.0, False), "log2": (0.0, False), "log10": (0.0, False),
           "np.log": (0.0, False), "np.log2": (0.0, False), "np.log10": (0.0, False),
           "np.log1p": (-1.0, False), "np.sqrt": (0.0, True)}
_ABS = ("np.abs", "abs")
_IDENTITY = "I"
_ALLOWED = sorted([*_INCREASING, *_ABS, _IDENTITY, "C"])

#: formulaic's transforms that learn from the data (or mix rows), refused with the reason
_LEARNED = {
    "center": "learns its centre from the data; centre by a public value instead, e.g. "
              "{x - 20} or I(x - 20)",
    "scale": "learns its centre and scale from the data; use public constants, e.g. "
             "{(x - 20) / 5}",
    "standardize": "learns its centre and scale from the data; use public constants, e.g. "
                   "{(x - 20) / 5}",
    "poly": "learns its orthogonal basis from the data; use powers with public constants, e.g. "
            "x + {x ** 2}",
    "bs": "places its knots from the data", "cr": "places its knots from the data",
    "cs": "places its knots from the data", "cc": "places its knots from the data",
    "te": "places its knots from the data",
    "lag": "mixes rows (a row's value comes from another row)",
    "hashed": "is not supported; declare the levels and use C(column)",
}


# -- interval arithmetic on a factor's expression ------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Interval:
    """The closed interval [lo, hi] that a value is known to lie in."""

    lo: float
    hi: float

    @property
    def magnitude(self) -> float:
        """max |v| over the interval."""
        return max(abs(self.lo), abs(self.hi))

    def __add__(self, o):
        return Interval(self.lo + o.lo, self.hi + o.hi)

    def __sub__(self, o):
        return Interval(self.lo - o.hi, self.hi - o.lo)

    def __mul__(self, o):
        p = [self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi]
        return Interval(min(p), max(p))

    def __neg__(self):
        return Interval(-self.hi, -self.lo)

    def contains_zero(self):
        return self.lo <= 0.0 <= self.hi


def _f(v):
    """A numpy float64 scalar as a Python float."""
    return float(np.float64(v))


def factor_interval(expr, ranges, where=None):
    """The interval of the numeric factor ``expr`` (a formulaic factor: a column name or a
    Python expression) when each column ``c`` it names lies in ``ranges[c]`` = (lo, hi).

    The expression may use the columns, numbers, + - * /, ** with a constant exponent, unary
    minus, I(...) and the functions of :data:`_ALLOWED` (log, exp, sqrt, abs, ...). Each operation
    maps intervals to an interval that holds every value it can take (exact when each column
    appears once). A value outside a function's domain (log of a range that reaches 0), a
    division by a range holding 0, or anything else is a :class:`BayesdpInputError` naming
    ``where`` (the term) and the expression.

    Returns
    -------
    (Interval, columns): the interval, and the columns the expression names.
    """
    where = where or expr
    if expr in ranges:  # a column looked up by name (it may not be a Python identifier)
        lo, hi = ranges[expr]
        return Interval(float(lo), float(hi)), (expr,)
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        raise BayesdpInputError(
            f"formula term {where!r}: {expr!r} is not a column with declared bounds nor a Python "
            "expression bayesdp can bound (inside a transform, name columns whose names are "
            "Python identifiers)") from None
    used = []
    out = _interval(tree, ranges, used, where, expr)
    if not (math.isfinite(out.lo) and math.isfinite(out.hi)):
        raise BayesdpInputError(
            f"formula term {where!r}: {expr!r} is not finite over the declared ranges (got "
            f"[{out.lo:g}, {out.hi:g}]); narrow the ranges of {', '.join(dict.fromkeys(used))}")
    return out, tuple(dict.fromkeys(used))


def _call_name(node):
    """'log', 'np.log', ... of a call's function, or None."""
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return f"{f.value.id}.{f.attr}"
    return None


def _constant(node):
    """The number of a numeric constant node (unary minus allowed), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _constant(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _interval(node, ranges, used, where, expr):
    """Interval arithmetic over the AST ``node`` (see :func:`factor_interval`)."""
    def bad(what):
        at = f"{where!r}" if where == expr else f"{where!r} ({expr!r})"
        return BayesdpInputError(f"formula term {at}: {what}")

    c = _constant(node)
    if c is not None:
        if not math.isfinite(c):
            raise bad(f"the number {c!r}")
        return Interval(c, c)
    if isinstance(node, ast.Name):
        if node.id not in ranges:
            raise bad(f"{node.id!r} is not a numeric column with a declared range")
        used.append(node.id)
        lo, hi = ranges[node.id]
        return Interval(float(lo), float(hi))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _interval(node.operand, ranges, used, where, expr)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a = _interval(node.left, ranges, used, where, expr)
        if isinstance(node.op, ast.Pow):
            p = _constant(node.right)
            if p is None:
                raise bad("a power whose exponent is not a number")
            return _power(a, p, bad)
        b = _interval(node.right, ranges, used, where, expr)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.Div):
            if b.contains_zero():
                raise bad(f"a division by a value whose range [{b.lo:g}, {b.hi:g}] holds 0")
            q = [a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi]
            return Interval(min(q), max(q))
        raise bad(f"the operator {type(node.op).__name__}")
    if isinstance(node, ast.Call):
        name = _call_name(node)
        if name in _LEARNED:
            raise bad(f"{name}() {_LEARNED[name]}")
        if name not in _INCREASING and name not in _ABS and name != _IDENTITY:
            raise bad(f"the function {name or ast.unparse(node.func)!r} (bayesdp bounds only "
                      f"{', '.join(n for n in _ALLOWED if n != 'C')}; C(column) only as a "
                      "whole factor)")
        if len(node.args) != 1 or node.keywords:
            raise bad(f"{name}() with other than one argument")
        v = _interval(node.args[0], ranges, used, where, expr)
        if name == _IDENTITY:
            return v
        if name in _ABS:
            if v.lo >= 0:
                return v
            if v.hi <= 0:
                return -v
            return Interval(0.0, v.magnitude)
        if name in _DOMAIN:
            low, closed = _DOMAIN[name]
            if v.lo < low or (v.lo == low and not closed):
                sign = ">=" if closed else ">"
                raise bad(f"{name}() needs values {sign} {low:g}, but its argument ranges over "
                          f"[{v.lo:g}, {v.hi:g}] (declare a range inside the domain, e.g. a "
                          f"lower bound above {low:g}, or shift it: log(x + 1))")
        fn = _INCREASING[name]
        with np.errstate(over="ignore"):
            return Interval(_f(fn(np.float64(v.lo))), _f(fn(np.float64(v.hi))))
    raise bad(f"{ast.unparse(node)!r} (bayesdp bounds columns, numbers, + - * /, ** with a "
              "constant exponent and the functions "
              f"{', '.join(n for n in _ALLOWED if n != 'C')})")


def _power(a, p, bad):
    """The interval of v ** p for v in ``a`` and a constant p."""
    whole = float(p).is_integer()
    if not whole and a.lo < 0:
        raise bad(f"a power {p:g} of a value whose range [{a.lo:g}, {a.hi:g}] reaches below 0")
    if p < 0 and a.contains_zero():
        raise bad(f"a negative power {p:g} of a value whose range [{a.lo:g}, {a.hi:g}] holds 0")
    with np.errstate(over="ignore"):
        ends = [_f(np.float64(a.lo) ** p), _f(np.float64(a.hi) ** p)]
    if p == 0:
        return Interval(1.0, 1.0)
    if whole and int(p) % 2 == 0 and a.contains_zero():  # an even power: smallest at 0
        return Interval(0.0, max(ends))
    return Interval(min(ends), max(ends))


# -- the declared bounds ------------------------------------------------------------------------


def level_key(v):
    """The text a level is compared by: strings as they are, whole numbers without a decimal
    point (so the level 2 matches the values 2, 2.0 and "2"), other numbers by repr."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        return str(int(f)) if math.isfinite(f) and f.is_integer() else repr(f)
    return str(v)


def _check_levels(column, value):
    """Declared levels of a categorical column: distinct names or whole numbers, as a tuple."""
    if isinstance(value, dict):
        value = value.get("levels")
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
        raise BayesdpInputError(
            f"bounds[{column!r}]: {column} is used as C({column}), a categorical column: "
            f"declare its levels as a non-empty list, e.g. ['a', 'b', 'c'], got {value!r}")
    out = []
    for lev in value:
        if isinstance(lev, np.generic):
            lev = lev.item()
        if isinstance(lev, bool) or not isinstance(lev, (str, int)):
            raise BayesdpInputError(
                f"bounds[{column!r}]: level {lev!r} is a {type(lev).__name__}; levels are names "
                "or whole-number codes (a yes/no column is a number: declare the range (0, 1) "
                "and use it without C())")
        out.append(lev)
    keys = [level_key(lev) for lev in out]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise BayesdpInputError(f"bounds[{column!r}]: level(s) {dup} declared twice")
    return tuple(out)


def _check_range(column, value):
    """A declared range (lo, hi) of finite numbers with lo <= hi, as floats."""
    if isinstance(value, dict):
        value = value.get("range")
    try:
        lo, hi = value
        if isinstance(lo, (bool, str, bytes)) or isinstance(hi, (bool, str, bytes)):
            raise TypeError
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise BayesdpInputError(
            f"bounds[{column!r}]: {column} is used as a number in the formula: declare its "
            f"public range as (lo, hi), got {value!r} (a categorical column goes in the formula "
            f"as C({column}), with its levels declared)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise BayesdpInputError(f"bounds[{column!r}]: the range ({lo!r}, {hi!r}) must be finite")
    if lo > hi:
        raise BayesdpInputError(f"bounds[{column!r}]: lo = {lo:g} > hi = {hi:g}; declare the range "
                                "as (lo, hi) with lo <= hi")
    return lo, hi


# -- the formula --------------------------------------------------------------------------------


def _formulaic():
    try:
        import formulaic
    except ImportError:  # pragma: no cover - a dependency of bayesdp
        raise BayesdpInputError("a formula needs formulaic (pip install formulaic)") from None
    return formulaic


def _parse(formula):
    """(response factor expression, [(term name, [factor exprs])], intercept) of a formula
    string, with a clear error for what bayesdp does not take."""
    if not isinstance(formula, str) or "~" not in formula:
        raise BayesdpInputError(f"formula must be a string 'response ~ terms', got {formula!r}")
    if "|" in formula:
        raise BayesdpInputError(f"formula {formula!r}: parts separated by '|' are not supported; "
                                "give one formula 'response ~ terms'")
    formulaic = _formulaic()
    try:
        parsed = formulaic.Formula(formula)
    except Exception as exc:  # formulaic's parser errors have no common base worth naming
        raise BayesdpInputError(f"formula {formula!r}: formulaic cannot parse it: {exc}") from None
    lhs, rhs = getattr(parsed, "lhs", None), getattr(parsed, "rhs", None)
    if lhs is None or rhs is None:
        raise BayesdpInputError(f"formula {formula!r}: give the response on the left of '~'")
    lhs_terms = list(lhs)
    if len(lhs_terms) != 1 or len(lhs_terms[0].factors) != 1:
        raise BayesdpInputError(f"formula {formula!r}: the left of '~' must be one response "
                                f"(a column or a transform of columns), got {str(lhs)!r}")
    terms, intercept = [], False
    for t in rhs:
        exprs = [fa.expr for fa in t.factors]
        if exprs == [INTERCEPT_TERM]:
            intercept = True
            continue
        for fa in t.factors:
            if str(fa.eval_method.value) == "literal":
                raise BayesdpInputError(
                    f"formula {formula!r}: the term {str(t)!r} is a number; only the intercept "
                    "('1', or '0' / '- 1' for none) may be")
        terms.append((str(t), exprs))
    if not terms:
        raise BayesdpInputError(f"formula {formula!r}: no terms besides the intercept")
    return lhs_terms[0].factors[0].expr, terms, intercept


def _categorical_column(expr):
    """The column of a factor ``C(column)``; None for any other factor. ``C`` with more
    arguments (levels, contrasts) is refused: the levels come from the declared bounds."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "C"):
        return None
    if len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Name):
        raise BayesdpInputError(
            f"formula factor {expr!r}: write C(column) alone; the levels come from the declared "
            "bounds (the first declared level is the reference), and other contrasts are not "
            "supported")
    return node.args[0].id


# -- the encoding -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class TableEncoding:
    """How the rows of a table become rows (x, y) of the regression: a formula and the public
    bounds of the columns it uses (module docstring; docs/tables.md).

    Build one with :meth:`build` (or read one with :meth:`from_dict`); every field is public.

    Attributes
    ----------
    formula : str
        The formula as given, e.g. ``"log(cnt + 1) ~ temp + C(season)"``.
    columns : dict
        The declared bounds of the columns the formula uses: ``{column: (lo, hi)}`` for a
        numeric column, ``{column: (level, ...)}`` for a column used as ``C(column)``.
    response : str
        The response's expression (the left of ``~``).
    intercept : bool
        Whether the formula has an intercept (the release's ``intercept=True``).
    feature_names : tuple of str
        The design's columns as formulaic names them (the intercept left out): the release's
        feature names (after "intercept" when there is one).
    terms : tuple of dict
        One per term (the intercept left out): ``term``, ``factors``, ``reduced`` (the
        categorical factors coded without their reference level), ``columns`` and ``bound``
        (the largest norm of the term's columns in a row).
    factors : dict
        ``{expression: {"kind": "numeric", "range": [lo, hi]}}`` or
        ``{"kind": "categorical", "column", "levels", "reference"}`` (reference: the level
        dropped where the factor is coded with reduced rank, else None).
    response_range : (lo, hi)
        The interval of the response.
    bounds : (B_x, B_y)
        B_x = sqrt(sum of the terms' bound^2), B_y = max |response_range|, each rounded up by
        a relative 1e-12 (so rounding never counts a row on the boundary as clipped).
    """

    formula: str
    columns: dict
    response: str
    intercept: bool
    feature_names: tuple
    terms: tuple
    factors: dict
    response_range: tuple
    bounds: tuple

    @classmethod
    def build(cls, formula, bounds) -> "TableEncoding":
        """The encoding of ``formula`` with the declared ``bounds`` (a mapping column ->
        (lo, hi) or levels; columns the formula does not use are left out). Bad input (a
        formula formulaic cannot parse, a transform that learns from the data, a column
        without bounds, a range with lo > hi, levels for a numeric column, ...) raises
        :class:`BayesdpInputError` naming it."""
        if not isinstance(bounds, dict):
            raise BayesdpInputError(
                "bounds: with a formula, declare the bounds of each column it uses as a dict "
                "{column: (lo, hi)} (numeric) or {column: [levels]} (inside C()), got "
                f"{type(bounds).__name__}")
        response, terms, intercept = _parse(formula)
        for key in bounds:
            if not isinstance(key, str):
                raise BayesdpInputError(f"bounds: column names are strings, got {key!r}")
        categorical = {}
        for _, exprs in terms:
            for e in exprs:
                col = _categorical_column(e)
                if col is not None:
                    categorical[e] = col
        cat_columns = set(categorical.values())
        if _categorical_column(response) is not None:
            raise BayesdpInputError(
                f"formula {formula!r}: the response {response!r} is categorical; bayesdp fits a "
                "linear regression of a numeric response")
        if not _names_in(response, bounds):
            raise BayesdpInputError(f"formula {formula!r}: the response {response!r} names no "
                                    "column")
        # numeric ranges of every column used outside C(); the names come from the expressions
        ranges = {}
        numeric_exprs = [response] + [e for _, exprs in terms for e in exprs
                                      if e not in categorical]
        for e in numeric_exprs:
            for col in _names_in(e, bounds):
                if col in cat_columns:
                    raise BayesdpInputError(
                        f"formula {formula!r}: column {col!r} is used both as C({col}) and as a "
                        "number; use it one way")
                if col not in bounds:
                    raise BayesdpInputError(
                        f"bounds: no bounds declared for column {col!r} (used in "
                        f"{'the response' if e == response else 'the term'} {e!r}); declare its "
                        f"public range, e.g. bounds={{{col!r}: (lo, hi)}}")
                ranges[col] = _check_range(col, bounds[col])
        levels = {}
        for e, col in categorical.items():
            if col not in bounds:
                raise BayesdpInputError(
                    f"bounds: no levels declared for column {col!r} (used as {e}); declare "
                    f"them, e.g. bounds={{{col!r}: ['a', 'b']}} (the first is the reference)")
            levels[col] = _check_levels(col, bounds[col])
        factors = {}
        for e in numeric_exprs[1:]:
            iv, _ = factor_interval(e, ranges)
            factors[e] = {"kind": "numeric", "range": [iv.lo, iv.hi]}
        y_iv, _ = factor_interval(response, ranges)
        for e, col in categorical.items():
            factors[e] = {"kind": "categorical", "column": col, "levels": list(levels[col]),
                          "reference": None}
        columns = {c: ranges[c] if c in ranges else levels[c]
                   for c in dict.fromkeys([*ranges, *levels])}
        enc = cls(formula=str(formula), columns=columns, response=response,
                  intercept=intercept, feature_names=(), terms=(), factors=factors,
                  response_range=(y_iv.lo, y_iv.hi), bounds=(1.0, 1.0))
        return enc._with_structure()

    def _with_structure(self) -> "TableEncoding":
        """This encoding completed from formulaic's model spec of the public prototype table:
        the design's columns, the terms' structure and the derived bounds."""
        spec = _model_spec(self.formula, self.columns, self.factors)
        rhs = spec.rhs
        terms, names = [], []
        factors = {k: dict(v) for k, v in self.factors.items()}
        for es in rhs.structure:
            if str(es.term) == INTERCEPT_TERM:
                continue
            exprs, reduced, scoped_sq = [], [], []
            for st in es.scoped_terms:
                # a scoped term's one-hot blocks put at most one 1 in a row; several scoped
                # terms of one term (C(a):C(b) -> C(b)-, C(a)-:C(b)) can be non-zero together
                size = 1.0
                for sf in st.factors:
                    exprs.append(sf.factor.expr)
                    if sf.reduced:
                        reduced.append(sf.factor.expr)
                    f = factors[sf.factor.expr]
                    if f["kind"] == "numeric":
                        size *= max(abs(f["range"][0]), abs(f["range"][1]))
                scoped_sq.append(size ** 2)
            exprs = list(dict.fromkeys(exprs))
            for e in reduced:
                factors[e]["reference"] = factors[e]["levels"][0]
            bound = math.sqrt(math.fsum(scoped_sq))
            terms.append({"term": str(es.term), "factors": exprs, "reduced": reduced,
                          "columns": list(es.columns), "bound": bound})
            names.extend(str(c) for c in es.columns)
        bx = math.sqrt(math.fsum(t["bound"] ** 2 for t in terms))
        by = max(abs(self.response_range[0]), abs(self.response_range[1]))
        bx, by = _round_up(bx), _round_up(by)
        if not (bx > 0 and by > 0 and math.isfinite(bx) and math.isfinite(by)):
            raise BayesdpInputError(
                f"bounds: the declared ranges give B_x = {bx:g}, B_y = {by:g}; both must be "
                "finite and > 0 (a column whose range is a single value 0, or a response that "
                "can only be 0, carries nothing to release)")
        out = dataclasses.replace(self, feature_names=tuple(names), terms=tuple(terms),
                                  factors=factors, bounds=(bx, by))
        object.__setattr__(out, "_spec", spec)
        return out

    # -- encoding rows ---------------------------------------------------------------------

    @property
    def model_spec(self):
        """formulaic's ModelSpecs of the public prototype table (built once)."""
        spec = self.__dict__.get("_spec")
        if spec is None:
            spec = _model_spec(self.formula, self.columns, self.factors)
            object.__setattr__(self, "_spec", spec)
        return spec

    @property
    def numeric_columns(self) -> tuple:
        """The columns with a declared range, in order: the columns ``n_clamped`` counts."""
        return tuple(c for c, v in self.columns.items() if c not in self.categorical_columns)

    @property
    def categorical_columns(self) -> tuple:
        """The columns used as C(column), in order."""
        return tuple(dict.fromkeys(f["column"] for f in self.factors.values()
                                   if f["kind"] == "categorical"))

    @property
    def response_columns(self) -> tuple:
        """The columns the response names."""
        return _names_in(self.response, self.columns)

    def encode(self, table, response=True):
        """The rows of ``table`` as the regression sees them.

        Each numeric column is clamped to its declared range (values outside are counted), each
        categorical column is matched to its declared levels, and the formula is evaluated row
        by row with the model spec of the public prototype table.

        Parameters
        ----------
        table : pandas DataFrame (or a dict of columns)
            Holds every column the formula uses (other columns are ignored).
        response : bool
            Also encode the response (False for new rows to predict: the response's columns
            need not be there).

        Returns
        -------
        (X, y, clamped): X (n, d) float64, the design without the intercept's column of ones
        (columns :attr:`feature_names`); y (n,) float64, or None without ``response``;
        clamped (n, k) bool, which values of the :attr:`numeric_columns` were clamped.

        Raises
        ------
        BayesdpInputError naming the column: a column the formula uses is missing, holds text
        or dates where numbers are declared, a missing or infinite value, or a level that is
        not declared.
        """
        import pandas as pd

        frame, clamped = self._prepared(table, response)
        spec = self.model_spec
        with np.errstate(all="ignore"):
            X = spec.rhs.get_model_matrix(frame, na_action="raise")
        expected = ([_FORMULAIC_INTERCEPT] if self.intercept else []) + list(self.feature_names)
        if [str(c) for c in X.columns] != expected:
            raise BayesdpInputError(
                f"table: formulaic encoded the columns {list(X.columns)}, but this encoding has "
                f"{expected} (a release made with another version of formulaic?)")
        X = pd.DataFrame(X).to_numpy(dtype=np.float64)[:, int(self.intercept):]
        X = np.ascontiguousarray(X)
        y = None
        if response:
            with np.errstate(all="ignore"):
                Y = spec.lhs.get_model_matrix(frame, na_action="raise")
            y = np.asarray(pd.DataFrame(Y).to_numpy(dtype=np.float64))[:, 0].copy()
        if not np.isfinite(X).all() or (y is not None and not np.isfinite(y).all()):
            raise BayesdpInputError(
                "table: the formula gives non-finite values inside the declared ranges (a bug: "
                "the ranges were checked against the domain)")
        return X, y, clamped

    def design(self, table):
        """The design of ``table``'s rows as a pandas DataFrame whose columns are the
        release's feature names: "intercept" (a column of ones) first when the formula has one,
        then :attr:`feature_names`; the index is the table's; ``frame.attrs["n_clamped"]``
        counts the values clamped per numeric column. For :func:`bayesdp.predict` and
        :func:`bayesdp.fit_nonprivate`."""
        import pandas as pd

        from .release_object import INTERCEPT_NAME

        X, _, clamped = self.encode(table, response=False)
        index = getattr(table, "index", None)
        frame = pd.DataFrame(X, columns=list(self.feature_names), index=index)
        if self.intercept:
            frame.insert(0, INTERCEPT_NAME, 1.0)
        frame.attrs["n_clamped"] = {c: int(n) for c, n in
                                    zip(self.numeric_columns, clamped.sum(axis=0))}
        return frame

    def _prepared(self, table, response):
        """(the used columns as a DataFrame of float64 and declared Categoricals, the clamp
        mask (n, k)) of ``table``, with every check of :meth:`encode`."""
        import pandas as pd

        from .rows import frame_dtype_problem

        if isinstance(table, dict):
            table = pd.DataFrame(table)
        if not isinstance(table, pd.DataFrame):
            raise BayesdpInputError(
                f"table: with a formula the rows are a pandas DataFrame with named columns, got "
                f"{type(table).__name__}")
        if len(table) == 0:
            raise BayesdpInputError("table: no rows")
        needed = [c for c in self.columns
                  if response or c not in self.response_columns or self._used_in_terms(c)]
        missing = [c for c in needed if c not in table.columns]
        if missing:
            uses = "; ".join(f"{c!r} in {self.use_of(c)}" for c in missing)
            raise BayesdpInputError(
                f"table: the formula {self.formula!r} names column(s) the table does not have: "
                f"{uses} (columns: {list(table.columns)[:20]})")
        out = {}
        clamped = np.zeros((len(table), len(self.numeric_columns)), dtype=bool)
        for c in needed:
            col = table[c]
            if isinstance(col, pd.DataFrame):
                raise BayesdpInputError(f"table: column {c!r} appears more than once")
            if c in self.categorical_columns:
                out[c] = self._categories(c, col)
                continue
            problem = frame_dtype_problem(col.dtype, col)
            if problem is not None:
                raise BayesdpInputError(
                    f"table: column {c!r} holds {problem[0]} values, but the bounds declare it "
                    f"numeric (a range); a categorical column goes in the formula as C({c}) "
                    "with its levels declared")
            try:
                v = col.to_numpy(dtype=np.float64, na_value=np.nan).copy()
            except (TypeError, ValueError):
                raise BayesdpInputError(f"table: column {c!r} must be numeric") from None
            bad = ~np.isfinite(v)
            if bad.any():
                raise BayesdpInputError(
                    f"table: column {c!r} has {int(bad.sum())} missing or infinite value(s) "
                    f"(first at row {int(np.flatnonzero(bad)[0])}); remove or impute them "
                    "before releasing")
            lo, hi = self.columns[c]
            clamped[:, self.numeric_columns.index(c)] = (v < lo) | (v > hi)
            out[c] = np.clip(v, lo, hi)
        return pd.DataFrame(out, index=pd.RangeIndex(len(table))), clamped

    def _categories(self, c, col):
        """Column ``c`` as a Categorical over its declared levels, refusing missing values and
        undeclared levels (naming them)."""
        import pandas as pd

        levels = self.columns[c]
        at = {level_key(lev): k for k, lev in enumerate(levels)}
        codes, uniques = pd.factorize(col, use_na_sentinel=True)
        if (codes < 0).any():
            raise BayesdpInputError(
                f"table: column {c!r} has {int((codes < 0).sum())} missing value(s) (first at "
                f"row {int(np.flatnonzero(codes < 0)[0])}); every row needs one of the declared "
                f"levels {list(levels)}")
        to = np.array([at.get(level_key(u), -1) for u in uniques], dtype=np.int64)
        if (to < 0).any():
            undeclared = [uniques[k] for k in np.flatnonzero(to < 0)]
            rows = int(np.isin(codes, np.flatnonzero(to < 0)).sum())
            shown = ", ".join(repr(u.item() if hasattr(u, "item") else u)
                              for u in undeclared[:5])
            raise BayesdpInputError(
                f"table: column {c!r} has level(s) that are not declared: {shown}"
                f"{' ...' if len(undeclared) > 5 else ''} ({rows} row(s)); the declared levels "
                f"are {list(levels)}. Declare them (levels must be public: fixed without "
                "looking at the data), or map or remove those rows")
        return pd.Categorical.from_codes(to[codes], categories=pd.Index(list(levels),
                                                                         dtype=object))

    def _used_in_terms(self, column):
        return any(column in _names_in(e, self.columns) or
                   (f["kind"] == "categorical" and f["column"] == column)
                   for e, f in self.factors.items())

    def use_of(self, column):
        """Where the formula uses ``column``, for messages."""
        if column in self.response_columns:
            return f"the response {self.response!r}"
        for e, f in self.factors.items():
            if column in _names_in(e, self.columns) or f.get("column") == column:
                return f"the term {e!r}"
        return "the formula"

    # -- the file ---------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The JSON-ready record of the encoding (docs/release-format.md, "table")."""
        return {
            "formula": self.formula,
            "library": "formulaic",
            "response": {"expression": self.response, "range": list(self.response_range)},
            "intercept": bool(self.intercept),
            "columns": {c: ({"levels": list(v)} if c in self.categorical_columns
                            else {"range": list(v)}) for c, v in self.columns.items()},
            "terms": [dict(t) for t in self.terms],
            "factors": {k: dict(v) for k, v in self.factors.items()},
            "feature_names": list(self.feature_names),
            "bounds": {"x": self.bounds[0], "y": self.bounds[1]},
            "rule": ("each numeric value clamped to its declared range, each categorical value "
                     "one of its declared levels, the formula evaluated row by row; B_x^2 = the "
                     "sum over the terms of the product over their numeric factors of "
                     "max|factor|^2 (a categorical factor counts 1: one indicator per row), "
                     "B_y = max|response|; both rounded up by 1e-12 (relative)"),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string (for an InferenceData's attrs)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, doc) -> "TableEncoding":
        """The encoding a release file records (:meth:`to_dict`), rebuilt from its formula and
        declared bounds and checked against the rest of the record: a record that disagrees
        with what its formula and bounds give is refused (:class:`BayesdpInputError` naming the
        field)."""
        if isinstance(doc, str):
            try:
                doc = json.loads(doc)
            except json.JSONDecodeError:
                raise BayesdpInputError("table: not valid JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("formula"), str) \
                or not isinstance(doc.get("columns"), dict):
            raise BayesdpInputError("table: the record needs 'formula' (a string) and 'columns' "
                                    "(the declared bounds)")
        columns = {}
        for c, v in doc["columns"].items():
            if not isinstance(v, dict) or len(v) != 1 or not ({"range", "levels"} & set(v)):
                raise BayesdpInputError(f"table.columns.{c}: expected {{'range': [lo, hi]}} or "
                                        f"{{'levels': [...]}}, got {v!r}")
            columns[c] = v
        enc = cls.build(doc["formula"], columns)
        mine = json.loads(enc.to_json())
        theirs = json.loads(json.dumps(doc, sort_keys=True))
        for key in sorted(set(mine) | set(theirs)):
            if key == "rule":
                continue
            if not _same(mine.get(key), theirs.get(key)):
                raise BayesdpInputError(
                    f"table.{key}: the record says {_short(theirs.get(key))}, but its formula "
                    f"and declared bounds give {_short(mine.get(key))}")
        return enc

    def __eq__(self, other):
        if not isinstance(other, TableEncoding):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __hash__(self):
        return hash(self.to_json())

    def difference(self, other) -> str:
        """The first thing in which ``other`` differs from this encoding, in words ('' when
        they are equal): the formula, a column's declared bounds, or another field."""
        a, b = self.to_dict(), other.to_dict()
        if a["formula"] != b["formula"]:
            return f"formula {b['formula']!r} against {a['formula']!r}"
        for c in dict.fromkeys([*a["columns"], *b["columns"]]):
            x, y = a["columns"].get(c), b["columns"].get(c)
            if x != y:
                return (f"declared bounds of column {c!r}: {_short(y)} against {_short(x)}")
        for key in ("feature_names", "terms", "factors", "response", "intercept", "bounds"):
            if json.dumps(a[key], sort_keys=True) != json.dumps(b[key], sort_keys=True):
                return f"{key} {_short(b[key])} against {_short(a[key])}"
        return ""

    def __repr__(self):
        return (f"TableEncoding({self.formula!r}, {len(self.feature_names)} columns, "
                f"bounds=({self.bounds[0]:.6g}, {self.bounds[1]:.6g}))")


def _same(a, b):
    """JSON values equal, numbers to 1e-12 relative."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _short(v):
    text = json.dumps(v, sort_keys=True)
    return text if len(text) <= 200 else text[:200] + " ..."


def _round_up(v):
    """``v`` rounded up by a relative 1e-12 (see :class:`TableEncoding`, ``bounds``)."""
    return float(v) * (1.0 + 1e-12)


def _names_in(expr, columns):
    """The columns (keys of ``columns``, or any name when ``columns`` is None) that the factor
    expression ``expr`` names: itself when it is one, else the Python names it uses that are
    not function names."""
    if expr in columns:
        return (expr,)
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise BayesdpInputError(
            f"formula factor {expr!r} is neither a column with declared bounds nor a Python "
            "expression (inside a transform, name columns whose names are Python identifiers)"
        ) from None
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    funcs |= {id(n.value) for n in ast.walk(tree)
              if isinstance(n, ast.Attribute)}
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in funcs]
    return tuple(dict.fromkeys(names))


def _prototype(columns, factors):
    """A public table of the declared values only: numeric columns alternate between their
    ends, categorical ones run through their levels. The model spec is built on it, so nothing
    in the encoding comes from the data."""
    import pandas as pd

    cats = {f["column"] for f in factors.values() if f["kind"] == "categorical"}
    m = max([2] + [len(columns[c]) for c in cats])
    out = {}
    for c, v in columns.items():
        if c in cats:
            out[c] = pd.Categorical.from_codes(np.arange(m) % len(v),
                                               categories=pd.Index(list(v), dtype=object))
        else:
            lo, hi = v
            out[c] = np.where(np.arange(m) % 2 == 0, lo, hi).astype(np.float64)
    return pd.DataFrame(out)


def _model_spec(formula, columns, factors):
    """formulaic's ModelSpecs of ``formula`` materialised on the public prototype table."""
    formulaic = _formulaic()
    with np.errstate(all="ignore"):
        mm = formulaic.Formula(formula).get_model_matrix(
            _prototype(columns, factors), na_action="raise", ensure_full_rank=True,
            output="pandas")
    return mm.model_spec


def check_release_table(rel):
    """The checks of a :class:`~bayesdp.releases.Release` with a table encoding: its intercept,
    feature names and bounds are the encoding's, and ``n_clamped`` (when present) holds one
    whole number >= 0 per holder, at most its rows, for each numeric column. Returns the
    normalised ``n_clamped`` ((J, k) int64, k numeric columns) or None."""
    from .release_object import INTERCEPT_NAME

    enc = rel.table
    if not isinstance(enc, TableEncoding):
        raise BayesdpInputError(f"table must be a TableEncoding or None, got {type(enc).__name__}")
    names = ((INTERCEPT_NAME,) if enc.intercept else ()) + tuple(enc.feature_names)
    if tuple(rel.feature_names) != names:
        raise BayesdpInputError(f"feature_names: a release encoded by the formula {enc.formula!r} "
                                f"has the features {list(names)}, got {list(rel.feature_names)}")
    if bool(rel.intercept) != enc.intercept:
        raise BayesdpInputError(
            f"intercept: the formula {enc.formula!r} {'has' if enc.intercept else 'has no'} "
            f"intercept, but the release has intercept={rel.intercept}")
    if rel.bounds is not None and not all(math.isclose(a, b, rel_tol=1e-12)
                                          for a, b in zip(rel.bounds, enc.bounds)):
        raise BayesdpInputError(
            f"bounds: a release encoded by a formula has the bounds its declared column bounds "
            f"give, {enc.bounds}, got {rel.bounds}")
    if rel.n_clamped is None:
        return None
    k = len(enc.numeric_columns)
    try:
        v = np.asarray(rel.n_clamped)
        ok = v.shape == (rel.J, k) and v.dtype != bool and (
            v.dtype.kind in "iu" or (v.dtype.kind == "f" and bool(np.all(v == np.round(v)))))
    except (TypeError, ValueError):
        ok = False
    top = rel.n_rows if rel.n_rows is not None else (rel.n if rel.average_rows == 1 else None)
    if not ok or np.any(v < 0) or (top is not None and np.any(v > top[:, None])):
        raise BayesdpInputError(
            f"n_clamped must be {rel.J} x {k} whole numbers (one row per holder, one column per "
            f"numeric column {list(enc.numeric_columns)}) between 0 and the holder's rows, got "
            f"{rel.n_clamped!r}")
    return v.astype(np.int64)


def categorical_columns_of(formula) -> set:
    """The columns ``formula`` uses as C(column) (parsed by formulaic)."""
    _, terms, _ = _parse(formula)
    out = set()
    for _, exprs in terms:
        for e in exprs:
            col = _categorical_column(e)
            if col is not None:
                out.add(col)
    return out


def check_column_bounds(formula, bounds):
    """``bounds`` of a release with a formula, normalised: a dict column -> (lo, hi) or a
    tuple of levels, for the columns the formula uses (checked by :meth:`TableEncoding.build`).
    Returns (the normalised dict, the encoding)."""
    enc = TableEncoding.build(formula, bounds)
    return dict(enc.columns), enc


def encoding_of(value) -> Optional[TableEncoding]:
    """The :class:`TableEncoding` of ``value``: a TableEncoding, a Release (its ``table``),
    a dict or JSON string of the record, or None."""
    if value is None or isinstance(value, TableEncoding):
        return value
    table = getattr(value, "table", None)
    if table is not None or hasattr(value, "S_hat"):
        if table is None:
            raise BayesdpInputError("encoding: this release was not made from a table with a "
                                    "formula; it has no encoding")
        return table
    return TableEncoding.from_dict(value)
