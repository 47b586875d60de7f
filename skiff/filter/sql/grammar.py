"""The SQL92 selector grammar (lark, LALR) and the words used to describe its tokens.

Tokens follow RocketMQ 4.9's `SelectorParser.jj`: keywords and identifiers
are case-insensitive to the lexer (a property name keeps its case), an
identifier is ``[A-Za-z_$][A-Za-z0-9_$]*``, string literals use single quotes
with ``''`` for a quote, integers are ``0`` or ``[1-9][0-9]*`` with an optional
``L``, floats have a point or an exponent, and ``-- ...`` and ``/* ... */`` are
comments. Rules differ from RocketMQ's in one deliberate way: NOT binds looser
than comparisons, as in SQL (docs/filter.md lists the consequences).

CONTAINS, STARTSWITH and ENDSWITH (RocketMQ 5.x) are keywords only right after
an operand; the contextual lexer keeps them usable as property names, which
4.9 expressions may rely on.
"""

from __future__ import annotations

_WORD_END = r"(?![A-Za-z0-9_$])"

RESERVED_WORDS = ("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS")
"""RocketMQ 4.9's reserved words: never property names."""

_RULES = r"""
?start: or_expr

?or_expr: and_expr
        | or_expr OR and_expr                           -> or_

?and_expr: not_expr
         | and_expr AND not_expr                        -> and_

?not_expr: equality
         | NOT not_expr                                 -> not_

?equality: comparison
         | equality (EQ | NE) comparison                -> compare
         | equality IS NULL                             -> is_null
         | equality IS NOT NULL                         -> is_not_null

?comparison: unary
           | comparison (GT | GE | LT | LE) unary       -> compare
           | comparison BETWEEN unary AND unary         -> between
           | comparison NOT BETWEEN unary AND unary     -> not_between
           | comparison IN LPAR string_list RPAR        -> in_
           | comparison NOT IN LPAR string_list RPAR    -> not_in
           | comparison MATCH STRING                    -> match
           | comparison NOT MATCH STRING                -> not_match

string_list: STRING (COMMA STRING)*

?unary: primary
      | MINUS unary                                     -> negate
      | PLUS unary                                      -> plus

?primary: STRING                                        -> string
        | DECIMAL                                       -> decimal
        | FLOAT                                         -> float
        | TRUE                                          -> true
        | FALSE                                         -> false
        | NULL                                          -> null
        | ID                                            -> property
        | LPAR or_expr RPAR                             -> parens

EQ: "="
NE: "<>" | "!="
GT: ">"
GE: ">="
LT: "<"
LE: "<="
LPAR: "("
RPAR: ")"
COMMA: ","
MINUS: "-"
PLUS: "+"
STRING: /'(?:[^']|'')*'/
FLOAT.3: /[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
DECIMAL: /0|[1-9][0-9]*[lL]?/
ID: /[A-Za-z_$][A-Za-z0-9_$]*/

%ignore /[ \t\n\r\f]+/
%ignore /--[^\n\r]*/
%ignore /\/\*(?:[^*]|\*+[^*\/])*\*+\//
"""


def _keyword(name: str, pattern: str) -> str:
    return f"{name}.2: /(?:{pattern}){_WORD_END}/i"


GRAMMAR = "\n".join(
    [_RULES]
    + [_keyword(word, word.lower()) for word in RESERVED_WORDS]
    + [_keyword("MATCH", "contains|startswith|endswith")]
)

VALUE_TERMINALS = frozenset(
    {"ID", "STRING", "DECIMAL", "FLOAT", "TRUE", "FALSE", "NULL", "LPAR", "MINUS", "PLUS", "NOT"}
)
"""What may start a value; an error expecting any of them says "expected a value"."""

OPERATOR_TERMINALS = frozenset(
    {"EQ", "NE", "GT", "GE", "LT", "LE", "BETWEEN", "IN", "IS", "MATCH", "AND", "OR", "NOT"}
)
"""What may follow a complete operand; an error expecting them says "an operator"."""

TERMINAL_WORDS = {
    "$END": "the end of the expression",
    "ID": "a property name",
    "STRING": "a string in single quotes",
    "DECIMAL": "a number",
    "FLOAT": "a number",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "EQ": "'='",
    "NE": "'<>'",
    "GT": "'>'",
    "GE": "'>='",
    "LT": "'<'",
    "LE": "'<='",
    "MINUS": "'-'",
    "PLUS": "'+'",
    "MATCH": "CONTAINS/STARTSWITH/ENDSWITH",
}
"""How an error message names a terminal; keywords not listed are named by themselves."""
