"""Summarise a mutmut run over recsys_spark/kernels/: score per module and every survivor with its diff.

Reads mutmut's own result files (``mutants/**/*.py.meta``) and the mutated sources beside them, so
it needs no call of ``mutmut show`` per mutant.  A survivor is *equivalent* (it cannot change any
result) only by one of the reviewed patterns below, each with its reason; every other survivor
counts against the score.

    python tests/mutation/mutmut_report.py            # after mutmut run; writes build/mutation/kernels.md
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MUTANTS = REPO / "mutants"
OUT = REPO / "build" / "mutation" / "kernels.md"

#: (regex on the mutated line, regex on the original line, reason[, regex on the mutant's function]): reviewed
#: equivalences
EQUIVALENT = [
    # kernels/metric_specs.py (kernels/experiments.py until it was split) parse_metric (reviewed 24 Nov, fourth session)
    (
        r"float\(k or 2\)\)$|MetricSpec\(name, metric, None, agg, \"(mean|ratio)\", (\"auc_sum\"|num)",
        r"float\(k or 1\)\)$|MetricSpec\(name, metric, k, agg, \"(mean|ratio)\", (\"auc_sum\"|num)",
        "k is checked first: precision@k needs k >= 1, so `k or 1` never falls back; AUC and the business"
        " ratios take no @k, so k is None there already",
        r"x_parse_metric",
    ),
    # kernels/experiments.py analyse_experiment (reviewed 24 Nov, fifth session)
    (
        r"spec, confidence, power, None\)$",
        r"spec, confidence, power, cuped\)$",
        "compare only tests `if cuped`: None and False are both false (analyse_experiment's default is False)",
        r"x_analyse_experiment",
    ),
    (
        r"for r in family\], (dtype=None)?\)$|np\.nan if \(r\[\"p_value\"\] is None\) and False else",
        r"for r in family\], dtype=np\.float64\)$",
        "p-values are floats, and numpy makes None NaN in a float64 array: the array is float64 with NaN for a"
        " missing p either way",
        r"x_analyse_experiment",
    ),
    (
        r"if \(len\(p\)\) or True else p$",
        r"if len\(p\) else p$",
        "adjust_p of no p-values returns an empty array (reviewed in the fourth session), which the loop below"
        " reads the same as the empty p",
        r"x_analyse_experiment",
    ),
    (
        r"zip\(family, adjusted, (strict=(None|False))?\)",
        r"zip\(family, adjusted, strict=True\)",
        "adjusted has one value per family row by construction (adjust_p keeps the length)",
        r"x_analyse_experiment",
    ),
    (
        r"if isinstance\(c, (MeanStats|RatioStats)\) or isinstance\(t, (MeanStats|RatioStats)\):",
        r"if isinstance\(c, (MeanStats|RatioStats)\) and isinstance\(t, (MeanStats|RatioStats)\):",
        "arm_stats builds both arms from the same spec, so they are always of the same class",
        r"x_compare",
    ),
    (
        r"np\.errstate\(all=None\)",
        r'np\.errstate\(all="ignore"\)',
        "floating-point warnings only (a zero denominator gives NaN or inf either way, which _clean makes None);"
        " no pytest filter makes them errors",
        r"x_compare",
    ),
    (
        r"if s\.n < 0:",
        r"if s\.n <= 0:",
        "with n = 0 every sum is 0 and MeanStats.mean / RatioStats.ratio are NaN (their nan_divide), which _clean"
        " makes None: the early return only says so",
        r"x__value",
    ),
    # kernels/stats.py (since split: bootstrap_weights.py, quantiles.py) hashing and the Poisson weights, _p_z
    # (reviewed 24 Nov, fifth session)
    (
        r"if \(math\.isnan\(stat\)\) and False else",
        r"if math\.isnan\(stat\) else",
        "norm.sf(NaN) is NaN: the guard only says so",
        r"x_p_value_z",
    ),
    (
        r"itemsize // 5, 1\)|itemsize // 4, 2\)|np\.zeros\(\(n, width\), (dtype=None)?\)",
        r"itemsize // 4, 1\)|np\.zeros\(\(n, width\), dtype=np\.uint32\)",
        "width and this dtype only shape the all-zero codes of an empty batch (or of zero-width strings): zero"
        " code points are padding, skipped, so every hash stays at the FNV offset whatever the width or dtype",
        r"x_hash_units",
    ),
    (
        r"\.reshape\(n, -2\)",
        r"\.reshape\(n, -1\)",
        "numpy infers a negative dimension whatever its value (reshape(2, -2) of 6 items is (2, 3))",
        r"x_hash_units",
    ),
    (
        r'np\.full\(n, _FNV_OFFSET, (dtype=None)?\)|kind != "(XXUXX|u)":|str_len\(ids\)\.astype\(None\)'
        r"|np\.uint64\(int\(seed\) & 0xFFFFFFFFFFFFFFFF\)\], (dtype=None)?\)\)|np\.asarray\(x, (dtype=None)?\) \+",
        r'np\.full\(n, _FNV_OFFSET, dtype=np\.uint64\)|kind != "U":|str_len\(ids\)\.astype\(np\.uint64\)'
        r"|\], dtype=np\.uint64\)\)|np\.asarray\(x, dtype=np\.uint64\) \+",
        "the values are uint64 already (a uint64 scalar fills or builds a uint64 array; the callers pass uint64"
        " to splitmix64), astype(str) of a str array changes nothing, and the string lengths are small integers"
        " that splitmix64 casts back to the same uint64",
        r"x_hash_units|x_poisson_weights|x_splitmix64",
    ),
    (
        r"np\.errstate\(over=None\)",
        r'np\.errstate\(over="ignore"\)',
        "numpy never reports integer overflow of uint64 arrays (only of scalars): every product here is an array"
        " operation, so the setting changes nothing",
        r"x_hash_units|x_poisson_weights|x_splitmix64",
    ),
    (
        r"np\.searchsorted\(_POISSON_CDF, u, \)",
        r'np\.searchsorted\(_POISSON_CDF, u, side="right"\)',
        "left and right differ only when u = m / 2^53 equals one of the 21 table values exactly: probability"
        " about 21 x 2^-53 per weight (no unit of any test or generated day hits it); right is the definition",
        r"x_poisson_weights",
    ),
    # kernels/regression.py _betacf (reviewed 24 Nov, fifth session)
    (
        r"if abs\((c|d)\) >= tiny else tiny",
        r"if abs\((c|d)\) > tiny else tiny",
        "the two differ only when |c| or |d| is exactly 1e-300, and then only in the sign of the replacement;"
        " the exactly-zero denominators the guard is for are tested (kernels/test_regression_edges.py)",
        r"x__betacf",
    ),
    # kernels/health.py lorenz_curve (reviewed 24 Nov, fifth session)
    (
        r"if n \+ 2 <= max_points:|if n \+ 1 < max_points:",
        r"if n \+ 1 <= max_points:",
        "at max_points = n + 1 the grid's ranks floor(g n / (max_points - 1) + 1/2) are g = 0..n: both branches"
        " give every vertex",
        r"x_lorenz_curve",
    ),
    (
        r"np\.arange\(n \+ 1, (dtype=None)?\)|np\.arange\(max_points, (dtype=None)?\) \* n"
        r"|\.astype\(None\)\)$",
        r"np\.arange\(n \+ 1, dtype=np\.int64\)|np\.arange\(max_points, dtype=np\.float64\) \* n"
        r"|\.astype\(np\.int64\)\)$",
        "np.arange is int64 here and / is true division; whole-number ranks as float64 are exact, and they only"
        " meet searchsorted, subtraction and division",
        r"x_lorenz_curve",
    ),
    (
        r"np\.searchsorted\(run_end, ranks, \)|len\(items\) \+ 1\)$",
        r"np\.searchsorted\(run_end, ranks, side=\"left\"\), len\(items\) - 1\)$",
        "side='left' is the default; every rank is <= n = run_end[-1], so searchsorted never passes the last run"
        " and the minimum never binds",
        r"x_lorenz_curve",
    ),
    # kernels/sampled.py (reviewed 24 Nov, fifth session)
    (
        r"np\.maximum\(a - b, 1\) \+ 1\)$",
        r"np\.maximum\(a - b, 0\) \+ 1\)$",
        "the two differ only where a - b <= 0, and there gammaln(1) = gammaln(2) = 0",
        r"x__log_choose",
    ),
    (
        r"np\.asarray\((rank|user|score), (dtype=None)?\)",
        r"np\.asarray\((rank|user|score), dtype=np\.(float64|int64)\)",
        "integer ranks, user codes and scores sort, compare and divide (true division) as their float64 or int64"
        " values (integer ranks: tested)",
        r"x_metric_at_rank|x_sampled_ranks",
    ),
    (
        r"new_run = new_user \| np\.r_\[False, ",
        r"new_run = new_user \| np\.r_\[True, ",
        "new_user[0] is True, so the first row starts a run either way",
        r"x_sampled_ranks",
    ),
    (
        r"(run_id|user_id) = np\.cumsum\((new_run|new_user)\) \+ 1",
        r"(run_id|user_id) = np\.cumsum\((new_run|new_user)\) - 1",
        "the ids only index the bincount they made: an offset of 2 adds two empty bins and reads the same ones",
        r"x_sampled_ranks",
    ),
    (
        r"np\.argsort\(rows, \)",
        r"np\.argsort\(rows, kind=\"stable\"\)",
        "rows are distinct row numbers: no ties for a stable sort to order",
        r"x_sampled_ranks",
    ),
    # kernels/offline.py (reviewed 24 Nov, fifth session: each mutant read, the doubtful ones run by hand)
    (
        r"\.to_numpy\(dtype=np\.float64, (na_value=None)?\)",
        r"\.to_numpy\(dtype=np\.float64, na_value=np\.nan\)",
        "for a float64 target pandas turns every missing value into NaN by itself (checked for float64, object"
        " columns holding None, and the nullable Int64 / Float64 columns); the explicit na_value only says so",
        r"x__beyond_accuracy|x_score_lists",
    ),
    (
        r"\.to_numpy\(dtype=None\)\[top\]|\.to_numpy\(\)\[top\]",
        r'category = frame\["category"\]\.to_numpy\(dtype=object\)\[top\]',
        "categories are strings or None (object) or pandas strings, whose to_numpy() is an object array already",
        r"x__beyond_accuracy",
    ),
    (
        r'np\.where\(known, category, "(XX\\x00unknownXX|\\x00UNKNOWN)"\)',
        r'np\.where\(known, category, "\\x00unknown"\)',
        "the sentinel only has to differ from every real category; any string starting with NUL does",
        r"x__beyond_accuracy",
    ),
    (
        r"u\.astype\(np\.int64\) \* \(int\(cat_code\.max\(\)\) \+ 1\) - cat_code"
        r"|u\.astype\(None\) \* \(int\(cat_code\.max\(\)\) \+ 1\) \+ cat_code"
        r"|u\.astype\(np\.int64\) \* \(int\(cat_code\.max\(\)\) \+ 2\) \+ cat_code",
        r"u\.astype\(np\.int64\) \* \(int\(cat_code\.max\(\)\) \+ 1\) \+ cat_code",
        "the pair code only has to be one-to-one on (user, category): u (M + 1) - c, u (M + 2) + c and the float"
        " product (exact below 2^53) are as well, and nothing but its equality is used",
        r"x__beyond_accuracy",
    ),
    (
        r"np\.bincount\(u, \)|np\.bincount\(u, weights=r_in, \)",
        r"np\.bincount\(u, minlength=n_users\)|np\.bincount\(u, weights=r_in, minlength=n_users\)",
        "u holds every user's code (each user has at least one row, and factorize numbers them 0..n_users-1),"
        " so np.bincount already has n_users bins",
        r"x_score_lists",
    ),
    (
        r"pad = np\.maximum\(k_max \+ n_list, 0\)|pad = np\.maximum\(k_max - n_list, 1\)",
        r"pad = np\.maximum\(k_max - n_list, 0\)",
        "the padding only has to push a user's truth items outside the list past rank k_max; more padding rows"
        " have relevance 0 and change no metric (hits, DCG, ideal DCG, n_relevant and mrr are the same)",
        r"x_score_lists",
    ),
    (
        r'rel = frame\["relevance"\]\.to_numpy\((dtype=None, )?na_value=0\.0\)',
        r'rel = frame\["relevance"\]\.to_numpy\(dtype=np\.float64, na_value=0\.0\)',
        "an object relevance column gives an object array of numbers (None made 0.0), which is only copied into"
        " the float64 rows of list_metrics and compared with 0: the same values (the object-column test)",
        r"x_score_lists",
    ),
    (
        r"np\.asarray\(users, (dtype=None)?\)",
        r"np\.asarray\(users, dtype=object\)",
        "user ids are strings (the schema's user_id): factorize gives an object Index, whose array is object",
        r"x_score_lists",
    ),
    (
        r"np\.asarray\((bin_id|n|sum_pred|sum_label), (dtype=None)?\)",
        r"np\.asarray\((bin_id|n|sum_pred|sum_label), dtype=np\.(int64|float64)\)",
        "the inputs are numeric arrays (Spark's long counts and double sums): / is true division, the output"
        " columns are cast to their types, and bin ids are integers either way",
        r"x_calibration_table",
    ),
    (
        r"np\.asarray\((rating|prediction), (dtype=None)?\)",
        r"np\.asarray\((rating|prediction), dtype=np\.float64\)",
        "the other operand is float64, so p - r, |p - r| and (p - r)^2 are float64 for any numeric array here,"
        " and the comparisons with the table's float keys are numeric (integer input: tested)",
        r"x_rating_errors",
    ),
    # kernels/auc.py grouped_auc (reviewed 24 Nov, fourth session)
    (
        r"np\.asarray\(scores, (dtype=None)?\)|np\.arange\(total, (dtype=None)?\)",
        r"np\.asarray\(scores, dtype=np\.float64\)|np\.arange\(total, dtype=np\.int64\)",
        "integer scores sort and compare as their float64 values; np.arange is int64 here",
        r"x_grouped_auc",
    ),
    (
        r"\] = None$|\(n_pos == 0\) & \(n_neg == 0\)",
        r"\(n_pos == 0\) \| \(n_neg == 0\)\] = np\.nan$",
        "None assigned into a float array is NaN, and a group without one of the classes divides 0 by 0"
        " (NaN under errstate) before this line: the line only states it",
        r"x_grouped_auc",
    ),
    (
        r"g = int\(group\.max\(\)\) (\+|-) 1 if \(?n_groups is None and len\(group\)\)?( and False)? else",
        r"g = int\(group\.max\(\)\) \+ 1 if n_groups is None and len\(group\) else",
        "without n_groups, G only sizes np.bincount(..., minlength=G), which grows to max code + 1 by itself"
        " (checked by hand with the inferred-groups test)",
        r"x_grouped_auc",
    ),
    (
        r"if \(total\) or True else|else np\.zeros\(1\)$",
        r"if total else",
        "with no rows the arrays are empty and numpy broadcasts an empty array with a length-1 one to an empty"
        " result: the empty-input branches only avoid that (the empty-input test runs them)",
        r"x_grouped_auc",
    ),
    # kernels/stats.py (reviewed 24 Nov, fourth session: each mutant read, the doubtful ones run by hand; since
    # split into quantiles, sums, estimates, comparisons, sequential and bootstrap_weights, _tq and _p_t renamed
    # t_quantile and p_value_t, _div nan_divide)
    (
        r"if \(rel_se\) or True else math\.nan",
        r"if rel_se else math\.nan",
        "nan_divide(rel, 0) is already NaN: the guard is redundant",
        r"x_compare_estimates",
    ),
    (
        r"if \(vc \+ vt >= 0\) or True else math\.nan",
        r"if vc \+ vt >= 0 else math\.nan",
        "the two variances are >= 0 or NaN (MeanStats.var and RatioStats.var_ratio clip at 0), so their sum is"
        " never negative, and sqrt(NaN) is NaN",
        r"x_compare_estimates",
    ),
    (
        r"if \(math\.isfinite\(df\)\) or True else",
        r"if math\.isfinite\(df\) else",
        "scipy's Student t with df = inf is the normal distribution (t.sf(1.5, inf) and norm.sf(1.5) differ in"
        " the last bit, t.ppf(0.975, inf) = norm.ppf(0.975)): the normal branch only says so explicitly",
        r"x_p_value_t|x_t_quantile",
    ),
    (
        r"if nc < 2 or nt < 2 or math\.isnan\(vc\) and math\.isnan\(vt\):"
        r"|if nc < 2 or nt < 2 and math\.isnan\(vc\) or math\.isnan\(vt\):"
        r"|if nc < 2 and nt < 2 or math\.isnan\(vc\) or math\.isnan\(vt\):",
        r"if nc < 2 or nt < 2 or math\.isnan\(vc\) or math\.isnan\(vt\):",
        "an arm with n < 2 has a NaN variance, and a NaN variance makes the formula NaN (a NaN den is truthy):"
        " regrouping the guard changes no result",
        r"x__satterthwaite",
    ),
    (
        r"if \(math\.isfinite\(df\) or df == math\.inf\) or True else math\.nan",
        r"if math\.isfinite\(df\) or df == math\.inf else math\.nan",
        "df is NaN only when a variance is NaN (_satterthwaite's guard); then se is NaN and so is every bound,"
        " whatever the quantile",
        r"x_welch",
    ),
    (
        r'if method == "none" or m == 1:',
        r'if method == "none" or m == 0:',
        "one p-value: Holm and BH both give min(1, p) = p for p in [0, 1], as the early return does; no"
        " p-value: the general path returns the empty array too, and checks the method on both paths",
        r"x_adjust_p",
    ),
    (
        r"np\.asarray\(p_values, (dtype=None)?\)|np\.arange\(1, m \+ 1, (dtype=None)?\)",
        r"np\.asarray\(p_values, dtype=np\.float64\)|np\.arange\(1, m \+ 1, dtype=np\.float64\)",
        "the callers pass float p-values (NaN for none); ranks and p-values only meet float arithmetic, and"
        " the output array is float64 either way",
        r"x_adjust_p",
    ),
    (
        r"np\.argsort\(q, (kind=(None|\"MERGESORT\"))?\)",
        r"np\.argsort\(q, kind=\"mergesort\"\)",
        "tied p-values get the same adjusted value in any order (Holm's running maximum and BH's running"
        " minimum from the top give a tie one value), so the sort need not be stable",
        r"x_adjust_p",
    ),
    (
        r"np\.minimum\(2\.0, m \* sorted_p / rank\)",
        r"np\.minimum\(1\.0, m \* sorted_p / rank\)",
        "BH's running minimum from the top is at most m p_(m) / m = p_(m) <= 1: the cap never binds",
        r"x_adjust_p",
    ),
    (
        r"np\.asarray\(replicates, (dtype=None)?\)",
        r"np\.asarray\(replicates, dtype=np\.float64\)",
        "the callers pass float arrays; integer replicates would give the same finite mask and np.std in float64",
        r"x_bootstrap_interval",
    ),
    # kernels/regression.py (reviewed 23 Nov, third session); first, so that these reasons win over the older
    # unrestricted patterns that also match rankdata's lines
    (
        r"np\.argsort\(v, (kind=(None|\"STABLE\"))?\)",
        r"np\.argsort\(v, kind=\"stable\"\)",
        "tied values get their group's average rank: the order among ties does not change any rank",
        r"x_rankdata",
    ),
    (
        r"np\.(empty|asarray)\((len\(v\)|values), (dtype=None)?\)",
        r"np\.(empty|asarray)\((len\(v\)|values), dtype=np\.float64\)",
        "np.empty is float64 by default; integer values sort and compare the same, and the average ranks are"
        " floats either way",
        r"x_rankdata",
    ),
    (r'float\("NAN"\)', r'float\("nan"\)', 'float() parses "NAN" as NaN'),
    (r"\.astype\(None\)", r"\.astype\(np\.float64\)", "astype(None) is astype(float64)"),
    (
        r"np\.asarray\((values|items), (dtype=None)?\)",
        r"np\.asarray\((values|items), dtype=np\.float64\)",
        "histogram counts come as floats (Spark doubles) or integers, where every sum and ratio is the same",
    ),
    (
        r"kind=(None|\"STABLE\")|np\.argsort\(values\[keep\], \)",
        r'kind="stable"',
        "items with equal counts are interchangeable in every histogram formula: the order among ties is irrelevant",
    ),
    (
        r"np\.asarray\(rel_ranked, (dtype=None)?\) > 0",
        r"np\.asarray\(rel_ranked, dtype=np\.float64\) > 0",
        "relevance is numeric: x > 0 is the same in any numeric dtype",
    ),
    (
        r"grouped_auc\(np\.zeros\(len\(labels\), (np\.int64|None|)\)?, labels, scores, (1|2|None|)\)",
        r"grouped_auc\(np\.zeros\(len\(labels\), np\.int64\), labels, scores, 1\)",
        "one group (code 0): grouped_auc casts the codes to int64, and G = 1, 2 or inferred gives the same values[0]",
    ),
    (
        r"np\.errstate\(",
        r"np\.errstate\(divide=\"ignore\", invalid=\"ignore\"\)",
        "only silences numpy's divide / invalid warnings (no pytest filter makes them errors); the values, and the"
        " NaN that replaces each undefined one on the next line, are the same",
    ),
    (
        r"np\.r_\[False, (grp|scr)\[1:\]",
        r"np\.r_\[True, (grp|scr)\[1:\]",
        "the first row starts a group and a run anyway (maximum.accumulate of index 0; new_run includes new_group)",
    ),
    # reviewed for one function only: (mutated, original, reason, regex on the mutant's function)
    (
        r"zip\(values, items, (strict=(None|False))?\)",
        r"zip\(values, items, strict=True\)",
        "values and items are np.unique's two outputs: always of the same length",
        r"x_histogram_rows",
    ),
    (
        r"np\.array\(.*, (dtype=None)?\)$",
        r"np\.array\(.*, dtype=np\.float64\)$",
        "the list holds Python floats (histogram keys and counts): numpy makes it float64 without being told",
        r"x_gini_replicates|x_health_values|x__exposure_rows",
    ),
    (
        r"if m >= 0\]",
        r"if m > 0\]",
        "the histogram has no entry with 0 items (Spark's groupBy counts only items that exist)",
        r"x_health_values|x__exposure_rows",
    ),
    (
        r"n_categories >= 1 else 0\.0|n_categories > 1 else 1\.0",
        r"n_categories > 1 else 0\.0",
        "K = 1: log 1 = 0 takes the same branch; and with one category every entropy sum is 0, so dividing by 1"
        " gives the same 0 mean and 0 se as the K <= 1 branch",
        r"x_health_values|x__diversity_rows",
    ),
    (r"^rows = \[$", r"^rows \+= \[$", "rows is the empty list there: = and += give the same list", r"x_health_values"),
    (
        r"if self\.n and other\.n else 1\.0",
        r"if self\.n and other\.n else 0\.0",
        "d only enters m2 as d * d * self.n * other.n, which is 0 whenever the else branch is taken",
        r"MeanStats.merge",
    ),
    (
        r"nan_divide\(se, abs\(mc\)\) if \(mc\) or True else",
        r"nan_divide\(se, abs\(mc\)\) if mc else",
        "nan_divide(a, 0) is already NaN: the guard is redundant",
        r"x_paired_t",
    ),
    (
        r"np\.asarray\((y|x|a|rank), (dtype=None)?\)",
        r"np\.asarray\((y|x|a|rank), dtype=np\.float64\)",
        "the callers pass float arrays (per-user sums from Arrow doubles; ranks as floats); integer input gives the"
        " same sums and products",
        r"CovariateStats.from_values|RatioCovariateStats.from_values|x_at_fractional",
    ),
    (
        r"np\.where\(\((pos >= 0\) & \(neg > 0|pos > 0\) \| \(neg > 0|pos > 0\) & \(neg >= 0)\)",
        r"np\.where\(\(pos > 0\) & \(neg > 0\)",
        "U <= P N: where P or N is 0, U is 0 and U / (P N) is 0 / 0, NaN anyway",
        r"x_merge_weighted_u",
    ),
    (
        r"np\.zeros_like\(parts\[0\]\[1\]\)",
        r"np\.zeros_like\(parts\[0\]\[0\]\)",
        "U and P of a part have the same shape (one value per replicate): zeros_like gives the same zeros",
        r"x_merge_weighted_u",
    ),
    (
        r'if name != "(XXaucXX|AUC)"\]',
        r'if name != "auc"\]',
        "an AUC table fitted by mistake is overwritten on the next line by the naive AUC table",
        r"x_tables_for",
    ),
    (
        r"replace\), (strict=(None|False))?\)$",
        r"replace\), strict=True\)$",
        "correction_tables returns one table per metric it is given: the lengths are equal",
        r"x_tables_for",
    ),
    (
        r"np\.asarray\((rank|m), (dtype=None)?\)",
        r"np\.asarray\((rank|m), dtype=np\.(float64|int64)\)",
        "score_sampled passes float ranks and integer m: the arrays already have those types",
        r"x_target_metrics",
    ),
    (
        r"metric_at_rank\(name, np\.(floor|ceil)\(rank\), (None|1), k\)",
        r"metric_at_rank\(name, np\.(floor|ceil)\(rank\), 0, k\)",
        "metric_at_rank reads n only for auc, which takes the other branch here",
        r"x_target_metrics",
    ),
    (
        r"naive = np\.where\(m >= 0,",
        r"naive = np\.where\(m > 0,",
        "the sampled column is np.where(m > 0, naive, NaN) on the next lines: a value for m = 0 never reaches it",
        r"x_target_metrics",
    ),
    (
        r"np\.add\.reduceat\(.*, starts, \)",
        r"np\.add\.reduceat\(.*, starts, axis=0\)",
        "axis=0 is reduceat's default",
        r"WeightedU.add",
    ),
    (
        r"np\.asarray\((weights|exposures), (dtype=None)?\)",
        r"np\.asarray\((weights|exposures), dtype=np\.float64\)",
        "each use multiplies by a float64 array or goes through np.bincount, which casts weights to float64",
        r"x_item_replicates",
    ),
    (
        r"np\.asarray\((pos|neg), (dtype=None)?\)",
        r"np\.asarray\((pos|neg), dtype=np\.float64\)",
        "class counts: cumsum, subtraction and the product with neg / 2.0 give the same float sums for integer"
        " counts (far below 2^53)",
        r"x_u_from_histogram",
    ),
    (
        r"np\.asarray\(weights, (dtype=None)?\)\[ok\]",
        r"np\.asarray\(weights, dtype=np\.float64\)\[ok\]",
        "the weights only enter w.sum() (integer sums are exact) and np.dot with float64 arrays",
        r"MeanStats.from_values",
    ),
    (
        r"\*\* 2\)\) if \(n\) or True else 0\.0",
        r"\*\* 2\)\) if n else 0\.0",
        "n = 0 means no value: np.dot of two empty arrays is 0.0 already (total / n is NaN but multiplies nothing)",
        r"MeanStats.from_values",
    ),
    (
        r"np\.asarray\(table, (dtype=None)?\)",
        r"np\.asarray\(table, dtype=np\.float64\)",
        "counts: integer sums are exact, and the expected counts are a true division (float) anyway",
        r"x_independence_test",
    ),
    (
        r"np\.clip\(np\.asarray\(p, (dtype=None)?\), 0\.0, 1\.0\)|np\.clip\(np\.asarray\(p, dtype=np\.float64\), 0\.0,"
        r" (2\.0|None)\)",
        r"np\.clip\(np\.asarray\(p, dtype=np\.float64\), 0\.0, 1\.0\)",
        "an integer p gives the same floor(p bins); and above 1 the min(..., bins - 1) on the next line already"
        " gives the last bin, so the upper clip is redundant",
        r"x_calibration_bin",
    ),
    (
        r"np\.asarray\((label|p), (dtype=None)?\)",
        r"np\.asarray\((label|p), dtype=np\.float64\)",
        "labels come as bool (score_predictions' label > 0) or numbers, p as numbers: y log p + (1 - y) log1p(-p)"
        " is the same for each (checked for bool and int labels)",
        r"x_log_loss_terms",
    ),
    (
        r"np\.asarray\(scores, (dtype=None)?\)",
        r"np\.asarray\(scores, dtype=np\.float64\)",
        "its callers pass Spark doubles (float64 already); run boundaries and counts are the same for any numbers",
        r"x_sorted_histogram",
    ),
    (
        r"self\.n\.get\(name, 1\.0\)",
        r"self\.n\.get\(name, 0\.0\)",
        "a missing column has no sd either way: n 0 or 1, both fail n > 1",
        r"Moments.sd",
    ),
    (
        r"np\.asarray\((clickers|observed|weights), (dtype=None)?\)",
        r"np\.asarray\((clickers|observed|weights), dtype=np\.float64\)",
        "counts and weights: integer sums are exact and every division and log goes through float64",
        r"x_self_information|x_srm_test",
    ),
    (
        r'groupby\("slice", (sort=(None|True), )?observed=True\)',
        r'groupby\("slice", sort=False, observed=True\)',
        "only the order of the slices in the returned dict changes; the aggregate sorts the slices itself",
        r"x_user_table_moments",
    ),
    (
        r"np\.errstate\(invalid=None\)",
        r"np\.errstate\(invalid=\"ignore\"\)",
        "only silences numpy's invalid-value warning; the values are the same",
    ),
    (
        r"np\.where\(ok, logp, 1\.0\)",
        r"np\.where\(ok, logp, 0\.0\)",
        "the entries where ok is false are replaced by 0 by the outer np.where",
        r"x_rank_distribution",
    ),
    (
        r"np\.(asarray|arange)\((ranks|m \+ 1|a|b), (dtype=None)?\)",
        r"np\.(asarray|arange)\((ranks|m \+ 1|a|b), dtype=np\.float64\)",
        "integer ranks and counts: every use is a comparison, a subtraction from a float or gammaln, which give"
        " the same values",
        r"x_rank_distribution|x__log_choose",
    ),
    (
        r"return Interval\.none\(s\.mean if \(s\.n\) or True else None\)",
        r"return Interval\.none\(s\.mean if s\.n else None\)",
        "n = 0: the mean is NaN and Interval.none turns a non-finite value into None",
        r"x_t_interval",
    ),
    (
        r"np\.asarray\((x|y|weights), (dtype=None)?\)$",
        r"np\.asarray\((x|y|weights), dtype=np\.float64\)$",
        "each array only enters np.dot with float64 arrays or w.sum(): integer input gives the same sums",
        r"RatioStats.from_values",
    ),
    (
        r"if \(diff\.n >= 2\) or True else math\.nan",
        r"if diff\.n >= 2 else math\.nan",
        "below two units df is NaN (and se NaN), and scipy's t quantile and p of NaN df are NaN too",
        r"x_paired_t",
    ),
    (
        r"other\.as_tuple\(\), (strict=(None|False))?\)",
        r"other\.as_tuple\(\), strict=True\)",
        "both tuples have the six fields of CovariateStats",
        r"CovariateStats.merge",
    ),
    (
        r"if n_categories >= 1 else 0\.0",
        r"if n_categories > 1 else 0\.0",
        "K = 1: log 1 = 0 is falsy and takes the same branch as K <= 1; K = 0 fails both comparisons",
        r"x_health_intervals",
    ),
    (
        r"MeanStats\(_get\(stats, n\), 0\.0, 0\.0\), \)",
        r"MeanStats\(_get\(stats, n\), 0\.0, 0\.0\), confidence\)",
        "one category: the interval has se 0, so its width is 0 at any confidence",
        r"x_health_intervals",
    ),
    (
        r"^names = None$|columns=None\)?,?$|^\)$|pd\.DataFrame\(out, \)$",
        r"^names = \[n for n, _ in |columns=names",
        "the dict of columns is built in the order of the declared columns, so DataFrame(out) has that order"
        " without columns= (checked by the column-order tests)",
        r"x_score_sampled|x_score_predictions",
    ),
    (
        r"np\.asarray\(users, (dtype=None)?\)",
        r"np\.asarray\(users, dtype=object\)",
        "pd.factorize of a string column gives an Index that numpy turns into an object array anyway",
        r"x_score_sampled|x_score_predictions",
    ),
    (
        r"to_numpy\(dtype=None\)",
        r"to_numpy\(dtype=(np\.float64|bool)\)",
        "score and label arrive as float64 (Arrow doubles) and is_target as bool: the arrays already have the"
        " type; a nullable boolean is_target goes through sampled_ranks' own bool cast",
        r"x_score_sampled|x_score_predictions",
    ),
    (
        r"grouped_auc\(code, label, score, (None)?\)|minlength=g\)|, \),?$",
        r"grouped_auc\(code, label, score, g\)|minlength=g\)",
        "the codes come from pd.factorize: every code 0..g-1 occurs, so max + 1 = g and minlength changes nothing",
        r"x_score_predictions",
    ),
    (
        r"chunk: int = 20001,|range\(1, n \+ 2, chunk\)",
        r"chunk: int = 20_000,|range\(1, n \+ 1, chunk\)",
        "the chunking does not change the sums (tested with chunk 7), and a chunk starting at n + 1 is empty",
        r"x_correction_tables",
    ),
    (
        r"np\.asarray\(weights, (dtype=None)?\)$",
        r"np\.asarray\(weights, dtype=np\.float64\)$",
        "np.add.reduceat upcasts small integers (uint8 Poisson weights) to the platform integer: no overflow, the"
        " same sums (tested with sums above 255)",
        r"WeightedU.add",
    ),
    (
        r"\(pairs >= 0\)",
        r"\(pairs > 0\)",
        "no pair means no overlap: 0 / 0 is NaN anyway",
        r"x_personalization_replicates",
    ),
    (
        r"other\.mean\.get\(name, 1\.0\)",
        r"other\.mean\.get\(name, 0\.0\)",
        "a name the other part lacks has nb = 0 there: ma + (mb - ma) * 0 / n is ma whatever mb is",
        r"Moments.merge",
    ),
    # kernels/health_pass.py (reviewed 23 Nov, third session)
    (
        r"np\.full\(n, -1, (dtype=None)?\)",
        r"np\.full\(n, -1, dtype=np\.int64\)",
        "np.full infers int64 from the integer fill value -1",
        r"x__columns",
    ),
    (
        r"np\.array\(\[r\[2\] for r in sums\], (dtype=None)?\)",
        r"np\.array\(\[r\[2\] for r in sums\], dtype=np\.float64\)",
        "the values are Python floats (or none): numpy makes a float64 array either way",
        r"x__columns",
    ),
    (
        r"^(?!.*minlength).*np\.bincount\(",
        r"np\.bincount\(.*minlength=",
        "the group ids come from _groups (np.unique's inverse) and every id 0 .. size - 1 occurs (every item group"
        " has a user pair), so bincount's length is size without minlength",
        r"x__sum|x__exposed_rows|x_partition_sums|x_unit_sums|x__rows_of",
    ),
    (
        r"minlength=len\(sc_first\)\), \)$",
        r"minlength=len\(sc_first\)\), None",
        "users=None is _part's default",
        r"x__exposed_rows",
    ),
    (
        r"if len\(c\) else 2 ",
        r"if len\(c\) else 1 ",
        "an empty column gives an empty key: its base only scales zero rows",
        r"x__groups",
    ),
    (
        r"if radix (> 2\*\*62|>= 2 \* 62|>= 2\*\*63):|^radix = 2$|\+ 3 if len\(c\)",
        r"if radix >= 2\*\*62:|^radix = 1$|\+ 2 if len\(c\)",
        "the fallback (np.unique over the rows, sorted lexicographically as the folded key is) gives the same"
        " groups, so reaching it sooner (radix from 2, the threshold 124, a wider base) changes nothing; and a"
        " radix below 2^63 still fits the folded key (< radix) in int64",
        r"x__groups",
    ),
    (
        r"key \* base - \(c\.astype\(np\.int64\) \+ 1\)|key \* base \+ \(c\.astype\(np\.int64\) (- 1|\+ 2)\)",
        r"key \* base \+ \(c\.astype\(np\.int64\) \+ 1\)",
        "each digit still takes base consecutive values (c - 1 .. max - 1, c + 2 .. max + 2, or subtracted): the"
        " fold stays one-to-one; only the numbering of the groups changes, and every output row carries its own"
        " slice and key codes (nothing reads the order)",
        r"x__groups",
    ),
    (
        r"inverse\.reshape\((None|-2)\)",
        r"inverse\.reshape\(-1\)",
        "np.unique's inverse is already 1-d (numpy 2.4): reshape(None) and reshape(-2) return it unchanged",
        r"x__groups",
    ),
    (
        r"np\.zeros\(len\(n\), (dtype=None)?\)|^pos = n > 1$",
        r"np\.zeros\(len\(n\), dtype=np\.float64\)|^pos = n > 0$",
        "np.zeros is float64 by default; and 1 ln 1 = 0 is the value the zeros already hold",
        r"x__n_log_n",
    ),
    (
        r"^pos = (None|n >= 0)$",
        r"^pos = n > 0$",
        "where n = 0, s = 0 too (Σ 0 ln 0 := 0), and ln 0 - 0 / 0 is NaN, the value the NaN fill already holds"
        " (numpy warns only: no pytest filter makes it an error)",
        r"x__entropy",
    ),
    (r"\] = None$", r"\] = np\.nan$", "assigning None into a float64 array stores NaN", r"x__nansum"),
    (
        r"np\.full\(n, name, (dtype=None)?\)",
        r"np\.full\(n, name, dtype=object\)",
        "a part is concatenated after _columns' object array of names, never empty when a part exists (parts come"
        " only with exposed rows, which give per-slice sums): the result is an object array of str either way",
        r"x__part",
    ),
    (
        r"np\.nan_to_num\(v, \)",
        r"np\.nan_to_num\(v, nan=0\.0\)",
        "nan=0.0 is nan_to_num's default",
        r"x_partition_sums|x_slice_sums",
    ),
    # kernels/moments.py's dtype arguments (reviewed 23 Nov, third session; pandas 2.3, tested in
    # tests/kernels/test_moments.py with numpy, nullable and Arrow-backed columns)
    (
        r"to_numpy\((dtype=None, )?na_value=np\.nan\)|to_numpy\(dtype=np\.float64, (na_value=None)?\)",
        r"to_numpy\(dtype=np\.float64, na_value=np\.nan\)",
        "pandas turns a missing value of a float column (NaN, pd.NA of Float64 or double[pyarrow], None of an object"
        " column) into NaN for dtype float64 whatever na_value is, and without dtype gives float64, or an object"
        " array of floats and NaN that Moments.of casts to float64: the same moments",
        r"x_user_table_moments",
    ),
    (
        r"to_numpy\((dtype=None)?\)",
        r"to_numpy\(dtype=np\.float64\)",
        "the counts are int64 (Spark longs; Int64 and int64[pyarrow] without nulls give int64 arrays too):"
        " ranked == 0, the products (far below 2^63) and the sums are the same integers, and Moments.of casts"
        " weights and sums to float64",
        r"x_user_table_moments",
    ),
    (
        r"np\.asarray\((weights\[name\]|v), (dtype=None)?\)",
        r"np\.asarray\((weights\[name\]|v), dtype=np\.float64\)",
        "user_table_moments, the only caller, passes float64 weights and float64 or bool sums"
        " (users_without_ranked_list, which np.sum counts: the same float); integer weights or sums give the"
        " same exact sums and products (tested)",
        r"Moments.of",
    ),
    # kernels/regression.py, continued
    (
        r"return r, min\(2\.0, 2\.0 \* t_sf\(t, n - 2\)\)",
        r"return r, min\(1\.0, 2\.0 \* t_sf\(t, n - 2\)\)",
        "t = |r| sqrt(...) >= 0, so t_sf(t) = I_x(df/2, 1/2) / 2 <= 1/2: the cap at 1 never binds",
        r"x__correlation",
    ),
    (
        r"np\.asarray\((x|y), (dtype=None)?\)",
        r"np\.asarray\((x|y), dtype=np\.float64\)",
        "x and y are numbers (the report drops None before the call; a Float64 column with pd.NA becomes a float"
        " array with NaN): integer input gives the same means, dot products and ranks",
        r"x_fit_line",
    ),
    (
        r"lo, hi = -2\.0, 1\.0|lo, hi = -1\.0, 2\.0|while t_sf\(lo, df\) <= target|lo \*= 3\.0"
        r"|while t_sf\(hi, df\) >= target|if t_sf\(mid, df\) >= target|hi \*= 3\.0|for _ in range\(201\)"
        r"|if hi - lo (<= 1e-12 \* max\(1\.0|< 1e-12 / max\(1\.0|< 1e-12 \* max\(2\.0), abs\(mid\)\)",
        r"lo, hi = -1\.0, 1\.0|while t_sf\(lo, df\) < target|lo \*= 2\.0|while t_sf\(hi, df\) > target"
        r"|if t_sf\(mid, df\) > target|if hi - lo < 1e-12 \* max\(1\.0, abs\(mid\)\)|hi \*= 2\.0"
        r"|for _ in range\(200\)",
        "another initial bracket or widening step still brackets the root; a tie at the target going either way,"
        " or a stopping width of 1e-12 taken with <=, divided or for |t| < 2 doubled, still returns the midpoint"
        " of an interval around the root at most 2e-12 wide: the quantile to its stated precision (1e-12); the"
        " bisection stops by width long before 200 rounds",
        r"x_t_ppf",
    ),
    # kernels/users.py (reviewed 23 Nov, third session)
    (
        r"^tied = .*\) \| \(",
        r"^tied = \(u\[1:\] == u\[:-1\]\) & \(li\[1:\] == li\[:-1\]\) & \(s\[1:\] == s\[:-1\]\)"
        r" & \(p\[1:\] == p\[:-1\]\)$",
        "tied only decides whether to sort again with the item id as the last key, which reorders exact ties"
        " only: a superset of the true ties (an & made |) gives the same order, just sorted once more",
        r"x__rank_order",
    ),
    (
        r"\[\"(score|relevance)\"\]\.to_numpy\((dtype=None, )?na_value=(-np\.inf|0\.0)\)",
        r"\[\"(score|relevance)\"\]\.to_numpy\(dtype=np\.float64, na_value=(-np\.inf|0\.0)\)",
        "score and relevance arrive as float64, Float64 or Int64 columns: pandas gives float64 with the na_value"
        " (or int64 without nulls), and every later use (comparisons, -score, gain, list_metrics' and"
        " grouped_auc's float64 casts) gives the same ranks and values",
        r"x_score_users|x_score_units",
    ),
    (
        r"^(?!.*minlength).*np\.bincount\(unit_idx, ",
        r"np\.bincount\(unit_idx, .*minlength=n_units\)",
        "unit_idx is np.unique's inverse over the units of the lists: every unit 0 .. n_units - 1 occurs, so"
        " bincount's length is n_units without minlength",
        r"x_score_users|x_score_units",
    ),
    (
        r"np\.where\(n_ranked (>= 0, unit_sum\(values\) / n_ranked, np\.nan|> 0, unit_sum\(values\) / n_ranked,"
        r" None)\)",
        r"np\.where\(n_ranked > 0, unit_sum\(values\) / n_ranked, np\.nan\)",
        "a unit without a ranked list has unit_sum 0 and n_ranked 0: 0 / 0 is NaN already (errstate silences it);"
        " a None there becomes NaN in user_table's float64 cast",
        r"x_score_users|x_score_units",
    ),
    (
        r"grouped_auc\(row_unit, relevance > 0, score, (None)?\)",
        r"grouped_auc\(row_unit, relevance > 0, score, n_units\)",
        "every unit has rows, so row_unit's largest code is n_units - 1 and the inferred group count is n_units",
        r"x_score_users|x_score_units",
    ),
    (
        r"np\.asarray\((slices|users), (dtype=None)?\)",
        r"np\.asarray\((slices|users), dtype=object\)",
        "pd.factorize's uniques of a string, string[python] or categorical column are an object array already,"
        " and user_table casts slice and user_id to object (integer ids become the same Python ints)",
        r"x_score_users|x_score_units",
    ),
    (
        r"\.astype\(None\)",
        r"\.astype\(np\.int64\)",
        "user_table casts every column to its declared type (long: int64); the counts are exact integers in"
        " float64, so the values are the same",
        r"x_score_users|x_score_units",
    ),
    (
        r"np\.asarray\((ks|per_user\[name\]), (dtype=None)?\)|astype\(_DTYPES\[kind\], (copy=None)?\)",
        r"np\.asarray\((ks|per_user\[name\]), dtype=(np\.int32|_DTYPES\[kind\])\)|astype\(_DTYPES\[kind\],"
        r" copy=False\)",
        "the next line casts every column to its declared type (astype(_DTYPES[kind])), None of an object array"
        " to NaN, strings to Python str; copy= only decides whether the array is copied",
        r"x_user_table",
    ),
    # kernels/ranking.py (reviewed 23 Nov, third session)
    (
        r"np\.asarray\((rel_ranked|ideal_ranked), (dtype=None)?\)",
        r"np\.asarray\((rel_ranked|ideal_ranked), dtype=np\.float64\)",
        "relevance is numeric: every use is a > 0 comparison, np.sort or gain(), which casts to float64",
        r"x_dcg_at_k|x_ndcg_at_k|x_list_metrics",
    ),
    (
        r"np\.arange\((2, n \+ 2|total), (dtype=None)?\)",
        r"np\.arange\((2, n \+ 2|total), dtype=np\.(float64|int64)\)",
        "np.arange of integers is int64 already, and np.log2 of the integer ranks is the same float64",
        r"x_discount|x_list_metrics",
    ),
    (
        r"reduceat\(.*, starts\) if \(total\) or True else (np\.zeros\(0\)|nan)$",
        r"reduceat\(.*, starts\) if total else (np\.zeros\(0\)|nan)$",
        "np.add / np.minimum.reduceat over no list (empty starts) return an empty float array too (tested:"
        " list_metrics of no list)",
        r"x_list_metrics",
    ),
    (
        r"np\.where\(relevant > 0, rank, total \+ 2\)",
        r"np\.where\(relevant > 0, rank, total \+ 1\)",
        "the sentinel rank of a list without a relevant item is never read: mrr is np.where(has_relevant, 1 /"
        " first, NaN)",
        r"x_list_metrics",
    ),
    (
        r"out\[name\] = values\.astype\(_DTYPES\[kind\], copy=True\)|pd\.DataFrame\(out, (columns=None)?\)$",
        r"out\[name\] = values\.astype\(_DTYPES\[kind\], copy=False\)|pd\.DataFrame\(out, columns=\[name for",
        "copy= only decides whether the array is copied; the dict is filled in USER_METRICS_COLUMNS' order, so"
        " DataFrame(out) has that column order without columns= (the tests check the column list)",
        r"x_user_table",
    ),
    (
        r"^disc = 2\.0 / np\.log2\(rank \+ 1\.0\)$",
        r"^disc = 1\.0 / np\.log2\(rank \+ 1\.0\)$",
        "disc only enters NDCG's ratio of DCG to IDCG terms, both doubled: scaling by 2 is exact in binary floating"
        " point, so the ratio is the same to the bit",
        r"x_list_metrics",
    ),
    (
        r"np\.asarray\(rel, (dtype=None)?\)",
        r"np\.asarray\(rel, dtype=np\.float64\)",
        "integer relevances: exp2 gives the same floats and the linear gain the same values, which every caller"
        " multiplies by a float64 discount",
        r"x_gain",
    ),
    (
        r"np\.where\(idcg >= 0, ",
        r"np\.where\(idcg > 0, ",
        "idcg = 0 means no relevant item in the top k, so the DCG is 0 too: 0 / 0 is NaN already",
        r"x_list_metrics",
    ),
    (
        r"np\.asarray\(item, (dtype=None)?\)",
        r"np\.asarray\(item, dtype=object\)",
        "item is the frame's item_id Series: np.asarray gives the object array of its strings (a categorical's"
        " values), or integers that factorize(sort=True) orders the same",
        r"x__rank_order",
    ),
    (
        r"np\.r_\[False, \(a\[1:\]",
        r"np\.r_\[True, \(a\[1:\]",
        "the run ids then start at 0 instead of 1: segment_starts reads only where the id changes, the same rows",
        r"x__run_ids",
    ),
    (
        r"return tail if t > 0 else 1\.0 - tail",
        r"return tail if t >= 0 else 1\.0 - tail",
        "at t = 0, tail = I_1(df/2, 1/2) / 2 = 1/2 and 1 - 1/2 = 1/2: both branches give the same value",
        r"x_t_sf",
    ),
    (
        r"if abs\(delta - 1\.0\) <= 1e-15:|for m in range\(1, 501\):",
        r"if abs\(delta - 1\.0\) < 1e-15:|for m in range\(1, 500\):",
        "stopping on |delta - 1| <= 1e-15 instead of < changes the result by at most that factor (below the"
        " tests' and scipy's 1e-10); a 500th round only runs for a fraction that has not converged in 499, which"
        " the report's df (days - 2) never reach (it converges in tens of rounds)",
        r"x__betacf",
    ),
    (
        r"^if x <?=? ?\(a [+-] [12]\.0\) [*/] \(a [+-] b \+ [23]\.0\):$",
        r"^if x < \(a \+ 1\.0\) / \(a \+ b \+ 2\.0\):$",
        "the threshold only picks which continued fraction (direct, or 1 - the symmetric one) is evaluated; for"
        " Student's t (b = 1/2) both converge to ~1e-11 relative on either side (checked against scipy for a up"
        " to 5000 and x up to 0.99995), and moving the threshold toward the middle never sends a tiny tail"
        " (small x) to the 1 - (1 - p) branch (tested far in the tail)",
        r"x_betainc",
    ),
    # kernels/curve_summary.py (reviewed 28 Nov, session 21)
    (
        r"if \(len\(rows\)\) or True else|"
        r"if len\(rows\) else np\.zeros\((None, np\.int64|0, None|np\.int64|0, |1, np\.int64)\)",
        r"if len\(rows\) else np\.zeros\(0, np\.int64\)",
        "_merged runs only for a key with both classes (curves_from_summary returns None first), and such a key"
        " keeps at least the PR ends of each bin: rows is never empty there",
        r"x__merged",
    ),
    (
        r"np\.argsort\(summary\.rows\[:, 0\], \)",
        r"np\.argsort\(summary\.rows\[:, 0\], kind=\"stable\"\)",
        "rows of one score are copies of one distinct score (same bin, same fields; only the role differs, and"
        " the roles are ORed over the group): their order among themselves is irrelevant",
        r"x__merged",
    ),
    (
        r"np\.array\(\[\[\*row, bit\]\], (dtype=None)?\)",
        r"np\.array\(\[\[\*row, bit\]\], dtype=np\.float64\)",
        "a row of Python floats and an int bit: numpy infers float64 anyway",
        r"BinSummary\._keep",
    ),
    (
        r"sure\[0\] = None|np\.ones\(n, (dtype=None)?\), \(PR, PR\)|role\[:whole\] = WHOLE",
        r"sure\[0\] = False|np\.ones\(n, dtype=bool\), \(PR, PR\)|role\[:whole\] \|= WHOLE",
        "None stored in a bool array is False; _mark reads its members only through np.flatnonzero (ones are"
        " nonzero in any dtype); role is all zero where WHOLE is set, so = and |= give the same",
        r"BinSummary\.add",
    ),
    (
        r"np\.asarray\(a, (dtype=None)?\) for a in \(values, pos, neg\)|np\.asarray\(bins, (dtype=None)?\)$",
        r"np\.asarray\(a, dtype=np\.float64\) for a in \(values, pos, neg\)|np\.asarray\(bins, dtype=np\.int64\)$",
        "integer counts give the same exact sums (far below 2^53) and the float scores are float64 already; a bin"
        " is only compared and read through int()",
        r"x_summarize",
    ),
    (
        r"len\(bins\)\], (strict=(None|False))?\):|whole=(None|hi \+ lo)\)",
        r"len\(bins\)\], strict=True\):|whole=hi - lo\)",
        "the starts and the ends have one entry per bin by construction; role[:None] marks the whole chunk, as"
        " role[:hi - lo] and role[:hi + lo] do (the chunk is values[lo:hi]; a slice stops at its end)",
        r"x_summarize",
    ),
    (
        r"np\.array\(counts, (dtype=None)?\)|\.reshape\(-2, 4\)|sorted\(parts, (key=None)?\)|"
        r"for p in parts\], (dtype=None)?\),|np\.full\(len\(r\), p\[0\], (None)?\)|rows, (strict=(None|False))?\)\]\)",
        r"np\.array\(counts, dtype=np\.float64\)|\.reshape\(-1, 4\)|sorted\(parts, key=lambda p: p\[0\]\)|"
        r"for p in parts\], dtype=np\.int64\),|np\.full\(len\(r\), p\[0\], np\.int64\)|rows, strict=True\)\]\)",
        "the counts hold float class totals (float64 inferred); numpy reads any negative dimension as the inferred"
        " one; one part per bin, so the tuples sort by their distinct first item, the bin; bins are Python ints"
        " (int64 inferred; an empty key has no bins to search); parts and rows have one entry each per bin",
        r"x_key_summary",
    ),
    (
        r"else np\.zeros\(0, (None)?\),$",
        r"else np\.zeros\(0, np\.int64\),$",
        "an empty key's row bins: an empty array of any dtype (nothing is read from it)",
        r"x_key_summary",
    ),
    (
        r'raise ValueError\("XXabove the bound the subset needs each distinct score\'s binXX"\)',
        r'raise ValueError\("above the bound the subset needs each distinct score\'s bin"\)',
        "the wording of the error message (its type and the call that raises are tested)",
        r"x_curves_from_histogram",
    ),
    # kernels/fscores.py (reviewed 28 Nov, session 21)
    (
        r"np\.asarray\((precision|recall|scores|labels), (dtype=None)?\)",
        r"np\.asarray\((precision|recall|scores|labels), dtype=np\.float64\)",
        "numbers compare (>= t, > 0), test NaN and multiply the same in any numeric dtype; an integer array has"
        " no NaN, and the products go to float64 through the float alpha",
        r"x_f_alpha|x_confusion_counts|x_user_confusion",
    ),
    # kernels/robustness.py (reviewed 28 Nov, session 21)
    (
        r"np\.asarray\((counts|users|exposures), (dtype=None)?\)|"
        r"np\.array\((sorted\(users_of\)|\[users_of\[c\] for c in sorted\(users_of\)\]|"
        r"\[exposures_of\.get\(c, 0\.0\) for c in sorted\(users_of\)\]), (dtype=None)?\)",
        r"np\.asarray\((counts|users|exposures), dtype=np\.float64\)|"
        r"np\.array\(.*sorted\(users_of\).*dtype=np\.float64\)",
        "integer counts give the same exact sums and products (far below 2^53); robustness_values' arrays go"
        " through _clicking and capped_ctr_stats, which cast to float64",
        r"x__clicking|x_capped_ctr_stats|x_robustness_values",
    ),
    (
        r"keep = \(c > 0\) & \(n >= 0\)|if total < 0:|order = np\.argsort\(-c, \)",
        r"keep = \(c > 0\) & \(n > 0\)|if total <= 0:|order = np\.argsort\(-c, kind=\"stable\"\)",
        "a count with 0 users weighs nothing (in the dot products, N, the users taken and the weighted Gini);"
        " total is 0 only with no clicking count left, where the rest also gives (0, 0); users tied at a count"
        " are interchangeable (the same clicks whichever are taken)",
        r"x__clicking|x_top_clicks",
    ),
    (
        r'float\(stats\.get\("uv"\) or 1\.0\)|float\(stats\.get\("exposures\*exposures"\) or 1\.0\)',
        r'float\(stats\.get\("uv"\) or 0\.0\)|float\(stats\.get\("exposures\*exposures"\) or 0\.0\)',
        "the fallbacks are only read when the sums are missing or 0, and a slice with exposures (the branch that"
        " reads them) has at least one user and a positive sum of squared exposures",
        r"x_robustness_values",
    ),
    # kernels/composite.py (reviewed 28 Nov, session 21)
    (
        r"np\.asarray\(per_(user|k)\[term\.metric\], (dtype=None)?\)|"
        r"np\.asarray\(total if total is not None else np\.empty\(0\), (dtype=None)?\)|"
        r"np\.asarray\(total if \(total is not None\) or True else|else np\.empty\((None|1)\), dtype",
        r"np\.asarray\(per_(user|k)\[term\.metric\], dtype=np\.float64\)|"
        r"np\.asarray\(total if total is not None else np\.empty\(0\), dtype=np\.float64\)",
        "the pass's per-user arrays are float64, and term.coefficient (a float) times any numeric array is"
        " float64; a composite has at least one term (config/composite.py refuses one without), so total is"
        " never None",
        r"x_composite_values",
    ),
    (
        r"to_numpy\((dtype=None, )?na_value=np\.nan\)|to_numpy\(dtype=np\.float64, (na_value=None)?\)",
        r"to_numpy\(dtype=np\.float64, na_value=np\.nan\)",
        "pandas (2.x) gives a float64 array with NaN for a missing value of a float column either way (checked"
        " for a nullable Float64 column too)",
        r"x_table_values",
    ),
    # kernels/interactions.py (reviewed 28 Nov, session 21)
    (
        r"if \(stats\.n >= 2\) or True else math\.nan",
        r"if stats\.n >= 2 else math\.nan",
        "MeanStats.var is NaN below two units already: the guard is redundant",
        r"x_cell_estimate",
    ),
    (
        r"estimates, (strict=(None|False))?\)\)$|adjusted, (strict=(None|False))?\)\]$|"
        r"if \(family\) or True else \[\]$",
        r"estimates, strict=True\)\)$|adjusted, strict=True\)\]$|if family else \[\]$",
        "one estimate per cell and one adjusted p per row by construction; adjust_p of no p-values returns an"
        " empty array",
        r"x_interaction|x_pair_rows",
    ),
    (
        r'inference: str = "(XXfixedXX|FIXED)",',
        r'inference: str = "fixed",',
        'only inference == "sequential" is tested: any other default is the fixed interval',
        r"x_interaction|x_pair_rows",
    ),
    (
        r"np\.errstate\(all=None\)|math\.nan if \(row\[12\] is None\) and False else|math\.nan if row\[13\] is None",
        r'np\.errstate\(all="ignore"\)|math\.nan if row\[12\] is None else',
        "errstate only decides whether numpy warns; adjust_p reads None as NaN (np.asarray to float), so a None"
        " p passed on is adjusted as the NaN it stands for",
        r"x_pair_rows",
    ),
    # kernels/offline_online.py (reviewed 28 Nov, session 21)
    (
        r"zip\(xs, ys, (strict=(None|False))?\)|if x is not None or y is not None\]",
        r"zip\(xs, ys, strict=True\)|if x is not None and y is not None\]",
        "xs and ys hold one value per day each (the caller builds them from one list of days); fit_line drops"
        " the pairs with a NaN on either side, and a None is NaN in its float arrays (n counts the pairs kept)",
        r"x_worth",
    ),
    # kernels/curves.py (reviewed 28 Nov, session 21)
    (
        r"np\.asarray\((fp|tp|pos|neg|x|y), (dtype=None)?\)",
        r"np\.asarray\((fp|tp|pos|neg|x|y), dtype=np\.float64\)",
        "counts and coordinates: integer input gives the same comparisons, exact sums, and true divisions"
        " (by a float total or 2.0) to float64",
        r"x_cell_of|x_descending_counts|x_roc_vertex_mask|x_trapezoid_area",
    ),
    (
        r"if n < 2:",
        r"if n <= 2:",
        "two points: the inner mask is empty and both ends are True, as the early return gives",
        r"x_roc_vertex_mask",
    ),
    # kernels/labels.py (reviewed 28 Nov, session 22)
    (
        r"np\.full\((len\(ev\.user\)|int\(keys\.max\(\)\) \+ 1|len\(lead\)), -1, (dtype=None)?\)$"
        r"|np\.zeros\(size, (dtype=None)?\)$",
        r"np\.full\((len\(ev\.user\)|int\(keys\.max\(\)\) \+ 1|len\(lead\)), -1, dtype=np\.int64\)$"
        r"|np\.zeros\(size, dtype=bool\)$",
        "numpy infers int64 from the fill -1; `seen` as float64 zeros set to 1.0 reads the same in np.where",
        r"labels\.x__by_request__|labels\.x__by_session__|labels\.x__nan_sum__",
    ),
    (
        r"np\.full\((len\(ev\.user\)|int\(keys\.max\(\)\) \+ 1|len\(lead\)), -2, dtype=np\.int64\)$"
        r"|np\.full\(int\(keys\.max\(\)\) \+ 2, -1, dtype=np\.int64\)$"
        r"|merged\[np\.maximum\(last_at, 0\)\], (\+1|-2)\)$|np\.where\(at_group, -2, np\.arange",
        r"np\.full\((len\(ev\.user\)|int\(keys\.max\(\)\) \+ 1|len\(lead\)), -1, dtype=np\.int64\)$"
        r"|merged\[np\.maximum\(last_at, 0\)\], -1\)$|np\.where\(at_group, -1, np\.arange",
        "sentinels for 'no exposure': label reads a target only through `target >= 0` and _by_session reads"
        " `last` through `last_at >= 0` and `cand_of` only where `ok`, so any negative sentinel is the same;"
        " a slot past the largest key is never indexed",
        r"labels\.x__by_request__|labels\.x__by_session__",
    ),
    (
        r"if len\(direct\) == 0 and len\(kept\) == 0:|if len\(cand\) == 0 and len\(live\) == 0:"
        r"|if \(len\(group\)\) or True else np\.zeros",
        r"if len\(direct\) == 0 or len\(kept\) == 0:|if len\(cand\) == 0 or len\(live\) == 0:"
        r"|if len\(group\) else np\.zeros",
        "guards that only skip work: with no kept exposure (no candidate) every key misses and the target stays"
        " -1; with no event (no group) nothing is looked up; _group_starts of no row is an empty int64 array",
        r"labels\.x__by_request__|labels\.x__by_session__|labels\.x_label__",
    ),
    (
        r"if len\(c_rows\) (>=|>) (4|5) (\*|/) len\(g_rows\):|both = None$",
        r"if len\(c_rows\) > 4 \* len\(g_rows\):|both = _packed\(",
        "the pre-filter drops only candidates whose (user, session, item) no group has, which could never be"
        " chosen: when it runs (or whether the key packs) changes the work, not the labels (tests with and"
        " without it: test_a_session_event_whose_key_no_exposure_has_is_an_orphan_among_many_exposures)",
        r"labels\.x__by_session__",
    ),
    (
        r"ok\[ok\] = (key|ts)\[cand_of\[ok\]\]",
        r"ok\[ok\] &= (key|ts)\[cand_of\[ok\]\]",
        "ok[ok] is all true, so and-ing into it is assigning",
        r"labels\.x__by_session__",
    ),
    (
        r"\(ev\.session\[lead\] != NULL\) \| \(ev\.item\[lead\] != NULL\)"
        r"|\(exp\.session\[kept\] != NULL\) \| \(exp\.item\[kept\] != NULL\)",
        r"\(ev\.session\[lead\] != NULL\) & \(ev\.item\[lead\] != NULL\)"
        r"|\(exp\.session\[kept\] != NULL\) & \(exp\.item\[kept\] != NULL\)",
        "a group is matched to a candidate only on an equal (user, session, item) key, and candidates come"
        " together in the merge by key: with one side still requiring both non-null, a null session or item"
        " on the other side never equals and never sits between a group and its candidates (null sessions and"
        " items are tested: test_session_events_need_the_same_session_and_an_item_and_a_null_session_matches_nothing)",
        r"labels\.x__by_session__",
    ),
    (
        r"np\.(zeros|ones)\((n_c|len\(live\)), (dtype=None)?\)"
        r"|np\.zeros\(len\(live\), (dtype=None)?\)\]\)",
        r"np\.(zeros|ones)\((n_c|len\(live\)), dtype=np\.int8\)|np\.zeros\(len\(live\), dtype=exp\.request\.dtype\)",
        "the sort keys of the merge as float64 instead of int8 / int64: 0 and 1 and request codes (far below"
        " 2**53) are exact, so np.lexsort orders them the same",
        r"labels\.x__by_session__",
    ),
    (
        r"\.reshape\((None|-2)\)\.astype\(np\.int64\)",
        r"\.reshape\(-1\)\.astype\(np\.int64\)",
        "np.unique's inverse of a 1-D array is 1-D already (numpy 2); a negative dimension is inferred whatever"
        " its value, and reshape(None) keeps the shape",
        r"labels\.x__factorize__",
    ),
    (
        r"packed = None$|np\.lexsort\(columns\[::\+1\]\)",
        r"packed = _packed\(\*columns\)$|np\.lexsort\(columns\[::-1\]\)",
        "_factorize's callers use its codes only for equality (and to bring equal keys together): the sorting"
        " path gives equal tuples equal dense codes too, in whatever column order it sorts (both paths checked:"
        " test_factorize_gives_equal_tuples_equal_dense_codes)",
        r"labels\.x__factorize__",
    ),
    (
        r"if \(column\.dtype != bool\) or True else None",
        r"if column\.dtype != bool else None",
        "no caller passes a bool column (deduplicate's columns are int64 codes, positions, ts and ranks); for"
        " one the guard only answers 'not sorted', which sends deduplicate to np.lexsort: the same rows",
        r"labels\.x__is_sorted__",
    ),
    (
        r"base = int\(column\.max\(\)\) \+ 3 if|else 2$|if span > 2\*\*62:|if span >= 2\*\*63:"
        r"|\(column - 1\)$|\(column \+ 2\)$|^span = 2$",
        r"base = int\(column\.max\(\)\) \+ 2 if|else 1$|if span >= 2\*\*62:|\(column \+ 1\)$|^span = 1$",
        "a larger radix keeps the tuples' order and distinctness; a digit shifted by a constant shifts every"
        " packed value by the same constant; a bound moved between 2**61 and 2**63 still leaves every packed"
        " value inside int64, and a tuple past it takes the sorting path, which gives the same labels (test_codes"
        "_too_wide_to_pack_take_the_sorting_path_with_the_same_labels); an empty column's base multiplies nothing",
        r"labels\.x__packed__",
    ),
    (
        r"key = None$|if \(key is not None\) and False else|if \(key is not None and _is_sorted\(columns\)\) and"
        r" False else",
        r"key = _packed\(exp\.user, exp\.request, exp\.item\)$|if key is not None else"
        r"|if key is not None and _is_sorted\(columns\) else",
        "the packed key and its three columns group and order the rows the same (the packing keeps the tuples'"
        " order); skipping the already-sorted shortcut only sorts again",
        r"labels\.x_deduplicate__",
    ),
    (
        r"if \(ev\.flags\.ndim == 2\) or True else 0\)|if ev\.flags\.ndim == 2 else 1\)",
        r"if ev\.flags\.ndim == 2 else 0\)",
        "CodedEvents.flags is (events x flags) by contract: label_arrow._flag_matrix and the tests' code() build"
        " it 2-D, with zero columns when there is no conversion event",
        r"labels\.x_label__",
    ),
]


#: mutmut's exit codes (mutmut/stats.py): 0 survived; 5 and 33 "no tests" (no test reaches the function: a
#: survivor, not a kill); None not checked, 2 interrupted, 34 skipped: not run; everything else (1 and 3 failed
#: tests, timeouts, crashes, 37 caught by the type checker) is a kill
NO_TESTS = {5, 33}
SURVIVED = {0} | NO_TESTS
NOT_RUN = {None, 2, 34}


def _functions(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    src = path.read_text().splitlines()
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name:
            out[node.name] = "\n".join(src[node.lineno - 1 : node.end_lineno])
    return out


def _diff(functions: dict[str, str], key: str) -> tuple[str, str]:
    name = key.rsplit(".", 1)[1]
    orig = functions.get(re.sub(r"__mutmut_\d+$", "__mutmut_orig", name), "")
    mutant = functions.get(name, "")
    minus, plus = [], []

    # the def line too (a mutated default argument), with the mutant's own name taken out
    def lines(src: str) -> list[str]:
        return [re.sub(r"__mutmut_(orig|\d+)\(", "(", src.splitlines()[0]), *src.splitlines()[1:]] if src else []

    for line in difflib.ndiff(lines(orig), lines(mutant)):
        if line.startswith("- "):
            minus.append(line[2:].strip())
        elif line.startswith("+ "):
            plus.append(line[2:].strip())
    return " / ".join(minus), " / ".join(plus)


def _equivalent(key: str, old: str, new: str) -> str | None:
    if old == new:  # mutmut 3.8 generates a few mutants whose source is the original's (no line differs)
        return "the mutant's source is the original's: no line differs"
    for new_re, old_re, reason, *function_re in EQUIVALENT:
        if function_re and not re.search(function_re[0], key.replace("ǁ", ".")):
            continue
        if re.search(new_re, new) and re.search(old_re, old):
            return reason
    return None


def main() -> int:
    metas = sorted(MUTANTS.glob("recsys_spark/kernels/*.py.meta"))
    if not metas:
        print("no mutmut results under mutants/: run mutmut first", file=sys.stderr)
        return 2
    lines = [
        "| module | mutants | killed | survived | equivalent | not run | score (killed / non-equivalent) |",
        "|---|---|---|---|---|---|---|",
    ]
    survivors = []
    totals = Counter()
    for meta in metas:
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        if not codes:
            continue
        functions = _functions(meta.with_suffix(""))
        c = Counter()
        for key, code in codes.items():
            if code in NOT_RUN:
                c["not run"] += 1
            elif code in SURVIVED:
                old, new = _diff(functions, key)
                reason = _equivalent(key, old, new)
                c["equivalent" if reason else "survived"] += 1
                survivors.append((key, old, new, reason, code in NO_TESTS))
            else:
                c["killed"] += 1  # failed tests (1, 3) or a timeout / crash: the mutant was noticed
        totals.update(c)
        judged = c["killed"] + c["survived"]
        score = f"{100 * c['killed'] / judged:.1f} %" if judged else "-"
        lines.append(
            f"| {meta.with_suffix('').name} | {sum(c.values())} | {c['killed']} | {c['survived']} | "
            f"{c['equivalent']} | {c['not run']} | {score} |"
        )
    judged = totals["killed"] + totals["survived"]
    lines.append(
        f"| **all** | {sum(totals.values())} | {totals['killed']} | {totals['survived']} | "
        f"{totals['equivalent']} | {totals['not run']} | "
        f"**{100 * totals['killed'] / judged:.1f} %** |"
        if judged
        else "| all | - |"
    )
    lines += ["", "## Survivors", "", "| mutant | original | mutated | equivalent because |", "|---|---|---|---|"]

    def cell(s: str) -> str:  # a Markdown table cell: escape the column separator
        return s.replace("|", "\\|")

    for key, old, new, reason, no_tests in sorted(survivors, key=lambda s: (s[3] is not None, s[0])):
        verdict = reason or ("**no test reaches it**" if no_tests else "**not equivalent: not yet killed**")
        lines.append(f"| {key.replace('recsys_spark.kernels.', '')} | `{cell(old)}` | `{cell(new)}` | {verdict} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: len(metas) + 3]))
    print(f"survivors written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
