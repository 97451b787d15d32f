"""A slate log small enough to compute by hand (tests/kernels/test_ope.py, tests/ope/test_ope.py)."""

#: two lists of one user and one list of another; columns: user, request, position, reward, propensity,
#: list propensity, prefix propensity, the candidate's probability e of the logged row
HAND = [
    ("a", "r1", 1, 1.0, 0.5, 0.1, 0.5, 0.5),
    ("a", "r1", 2, 0.0, 0.25, 0.1, 0.1, 1.0),
    ("a", "r2", 1, 0.0, 0.5, 0.2, 0.5, 0.0),
    ("a", "r2", 2, 1.0, 0.4, 0.2, 0.2, 0.5),
    ("b", "r3", 1, 1.0, 0.2, 0.05, 0.2, 0.4),
    ("b", "r3", 2, 1.0, 0.5, 0.05, 0.05, 0.5),
]
