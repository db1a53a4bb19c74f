"""Writes answer_forms.jsonl (issue 18's answer forms) beside this file.

Every row is written out below by hand as (class, ground truth, final answer,
expected verdict, why); the script only wraps each final answer in one of the
four final-answer styles the models use. Regenerate with
    python3 reward/testdata/answer_forms.py
"""
import json
import os
# (class, truth, final answer as written, expected, why)
S = [
 "Answer: {a}",
 "Therefore, the final answer is $\\boxed{{{a}}}$.",
 "Final Answer: The final answer is ${a}$. I hope it is correct.",
 "So the answer is \\(\\boxed{{{a}}}\\).",
]
rows = []
def add(cls, truth, ans, exp, why):
    rows.append((cls, truth, ans, exp, why))

# 1. equations whose left side is an expression or a tuple of names
E = "equation"
add(E, "12", "a + b = 12", True, "expression = value")
add(E, "106", "m+n=106", True, "expression = value")
add(E, "\\left( 1, 2, 3 \\right)", "(x, y, z) = (1, 2, 3)", True, "tuple of names = tuple")
add(E, "(3,-1)", "(x,y)=\\left(3,-1\\right)", True, "tuple of names = tuple")
add(E, "7\\sqrt{2}", "AB + BC = 7\\sqrt{2}", True, "expression = irrational value")
add(E, "\\frac{14}{3}", "f(-2)+f(-1)+f(0) = \\frac{14}{3}", True, "sum of values = fraction")
add(E, "5", "2 + 3 = 5", True, "arithmetic = value")
add(E, "(2, 5)", "(2, 5)", True, "plain tuple")
add(E, "(a, b) = (2, 5)", "(2,5)", True, "truth names its tuple")
add(E, "3", "a+b+c = 3", True, "expression = value")
add(E, "12", "a + b = 13", False, "wrong value in the same form")
add(E, "106", "m+n=107", False, "wrong value in the same form")
add(E, "12", "12 = a + b + 1", False, "right value on the left, wrong right side")
add(E, "5", "5 = 6", False, "right value on the left, wrong right side")
add(E, "(1,2,3)", "(1, 2, 3) = (1, 2, 4)", False, "right tuple on the left, wrong right side")
add(E, "(1,2,3)", "(x, y, z) = (1, 2, 4)", False, "wrong tuple")
add(E, "(1,2,3)", "(x, y, z) = (2, 1, 3)", False, "tuple in another order")
add(E, "(1,2,3)", "(x, y) = (1, 2)", False, "tuple too short")
add(E, "5", "x = 3", False, "x = 3 where the truth is 5")
add(E, "0", "x^2 - 4 = 0", False, "an equation, not a value")
add(E, "2", "x^2 - 4 = 0", False, "an equation, not a value")
add(E, "2", "x + y = 2x", False, "right side mentions the unknowns")

# 2. thousands separators written with LaTeX spacing
T = "thousands"
add(T, "1000", "1\\,000", True, "thin space")
add(T, "1,000", "1\\,000", True, "thin space vs comma")
add(T, "1000000", "1\\,000\\,000", True, "thin spaces")
add(T, "10,080", "10{,}080", True, "{,}")
add(T, "12345678", "12{,}345{,}678", True, "{,} twice")
add(T, "1000", "1\\!,\\!000", True, "comma between negative spaces")
add(T, "1000", "1,\\,000", True, "comma then thin space")
add(T, "1000", "1\u2009000", True, "Unicode thin space")
add(T, "1\\,000\\,000", "1\u202f000\u202f000", True, "narrow no-break spaces")
add(T, "1250.5", "\\$1{,}250.50", True, "{,} with decimals and a dollar sign")
add(T, "11,\\! 111,\\! 111,\\! 100", "11\\,111\\,111\\,100", True, "MATH's ,\\! against thin spaces")
add(T, "(1000, 2000)", "(1\\,000, 2\\,000)", True, "separators inside a tuple")
add(T, "1000", "1\\;000", True, "medium space")
add(T, "1000", "1~000", True, "tie")
add(T, "20{,}000", "20000", True, "truth with {,}")
add(T, "100", "1{,}00", False, "{,} before two digits is not a thousands separator")
add(T, "100", "1\\,00", False, "thin space before two digits")
add(T, "1000", "1{,}0000", False, "group of four digits")
add(T, "10000", "1{,}0000", False, "group of four digits")
add(T, "100", "1\\,000", False, "wrong value")
add(T, "10000", "1\\,000", False, "wrong value")
add(T, "0", "1\\,000", False, "digits side by side are not a product")
add(T, "1234", "12\\,34", False, "thin space inside a number")
add(T, "1000", "1\\,001", False, "wrong value in the same form")
add(T, "3.14", "3{,}14", False, "decimal comma is not read")
add(T, "1,000,000", "1,\\!000", False, "wrong value")
add(T, "408", "12 34", False, "two numbers side by side")
add(T, "1,000,000", "1,000", False, "bare commas, wrong value (not the lists 1, 0 and 1, 0, 0)")
add(T, "2,000", "2,000,000", False, "bare commas, wrong value")
add(T, "12,000,000", "12\\,000", False, "thin space, wrong value")
add(T, "1000000", "1,000,000", True, "bare commas")

# 3. a text answer after an article or a short phrase
X = "article"
add(X, "\\text{ellipse}", "an ellipse", True, "article")
add(X, "ellipse", "\\text{an ellipse}", True, "article inside \\text")
add(X, "\\text{parabola}", "a parabola", True, "article")
add(X, "ellipse", "The ellipse", True, "definite article")
add(X, "\\text{ellipse}", "It is an ellipse", True, "short phrase")
add(X, "\\text{hyperbola}", "The curve is a hyperbola", True, "short phrase")
add(X, "\\text{circle}", "\\text{a circle}", True, "article inside \\text")
add(X, "ellipse", "An Ellipse", True, "capitalized")
add(X, "\\text{ellipse}", "a circle", False, "wrong word after an article")
add(X, "\\text{hyperbola}", "an ellipse", False, "wrong word after an article")
add(X, "\\text{ellipse}", "not an ellipse", False, "negated")
add(X, "\\text{ellipse}", "It is not an ellipse", False, "negated phrase")
add(X, "\\text{ellipse}", "an ellipse or a circle", False, "hedge")
add(X, "\\text{parabola}", "a hyperbola", False, "wrong word after an article")
add(X, "\\text{plane}", "a line", False, "wrong word after an article")
add(X, "\\text{hyperbola}", "The curve is an ellipse, not a hyperbola", False, "a sentence")

# 4. chained inequalities and intervals
I = "interval"
add(I, "[1, 8]", "1 \\le x \\le 8", True, "chain for a closed interval")
add(I, "1 \\le x \\le 8", "[1,8]", True, "interval for a chain")
add(I, "(1,8]", "1 < x \\leq 8", True, "half-open")
add(I, "(-2,3)", "-2 < x < 3", True, "open")
add(I, "[1,8]", "8 \\ge x \\ge 1", True, "descending chain")
add(I, "\\left[\\frac{1}{2}, 4\\right)", "\\frac12 \\leq t < 4", True, "fractions")
add(I, "x \\in [1,8]", "1 \\le x \\le 8", True, "chain against x in interval")
add(I, "1 \\le x \\le 8", "x \\in [1, 8]", True, "x in interval against chain")
add(I, "(2, \\infty)", "x > 2", True, "one-sided")
add(I, "(-\\infty, 5]", "x \\le 5", True, "one-sided")
add(I, "(2,+\\infty)", "2 < x", True, "bound on the left")
add(I, "[0,1]", "0 \\leq a \\leq 1", True, "another letter")
add(I, "[1, 8]", "1 < x \\le 8", False, "open end for a closed one")
add(I, "[1, 8]", "1 \\le x < 8", False, "open end for a closed one")
add(I, "[1, 8]", "1 \\le x \\le 9", False, "wrong endpoint")
add(I, "1 \\le x \\le 8", "[1, 8)", False, "wrong bracket")
add(I, "1 \\le x \\le 8", "(1, 8]", False, "wrong bracket")
add(I, "[1, 8]", "8 \\le x \\le 1", False, "endpoints swapped")
add(I, "[1, 8]", "1 \\le x \\ge 8", False, "not an interval")
add(I, "(2, \\infty)", "x \\ge 2", False, "closed for open")
add(I, "(2, \\infty)", "x < 2", False, "wrong side")
add(I, "(-\\infty, 2)", "2 < x", False, "wrong side")
add(I, "[1, 8]", "1 \\le x+1 \\le 8", False, "not an interval of a name")
add(I, "\\{1, 8\\}", "1 \\le x \\le 8", False, "a set, not an interval")
add(I, "[1,8]", "1 \\le x \\le 8 \\text{ or } x = 9", False, "extra solution")
add(I, "x < 3", "y < 3", False, "another variable")

# 5. an answer too long to parse (over the 4096-byte MaxAnswerBytes)
L = "long"
big = "".join(str((7 * i * i + 3 * i + 1) % 10) for i in range(4200))
add(L, big, big, True, "4200 digits identical to the truth")
add(L, big, "\\,".join(big[i:i + 3] for i in range(0, len(big), 3)), True, "4200 digits in thin-spaced groups of three")
add(L, big, big[:-1] + str((int(big[-1]) + 1) % 10), False, "4200 digits, last one wrong: over budget")
add(L, big, "42", False, "short answer against a long truth: over budget")

out = []
for k, (cls, truth, ans, exp, why) in enumerate(rows):
    style = S[k % len(S)]
    resp = "We work through the problem step by step and check the cases.\n\n" + style.format(a=ans)
    out.append({"id": f"{cls}-{k}", "ground_truth": truth, "response": resp, "expected": exp, "why": why})
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer_forms.jsonl"), "w") as f:
    for r in out:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
import collections
c = collections.Counter((r[0], r[3]) for r in rows)
print(sorted(c.items()))
