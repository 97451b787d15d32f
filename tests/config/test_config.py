"""Settings: conf/default.toml mirrors the code defaults; overrides; errors name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recsys_spark.config import Config, load_config
from recsys_spark.errors import ConfigError

DEFAULT_TOML = Path(__file__).resolve().parents[2] / "conf" / "default.toml"


def test_default_toml_holds_every_setting_with_the_code_defaults():
    assert load_config(DEFAULT_TOML) == load_config(None) == Config()


def test_every_key_in_default_toml_is_commented():
    lines = DEFAULT_TOML.read_text().splitlines()
    is_key = [("=" in line and not line.lstrip().startswith("#")) for line in lines]
    for i, line in enumerate(lines):
        if is_key[i]:
            j = i - 1
            while is_key[j]:  # a group of related keys shares the comment above it
                j -= 1
            assert lines[j].lstrip().startswith("#"), f"no comment above {line!r}"


def test_set_reads_toml_values_and_bare_words():
    cfg = load_config(
        None,
        [
            "metrics.k=[10, 5]",
            "labels.event_weights={click = 1, purchase = 3}",
            "metrics.ndcg_gain=linear",
            "attribution.window_minutes=15",
            "spark.spark.sql.shuffle.partitions=8",
        ],
    )
    assert cfg.metrics.k == (5, 10)
    assert dict(cfg.labels.event_weights) == {"click": 1.0, "purchase": 3.0}
    assert cfg.metrics.ndcg_gain == "linear"
    assert cfg.attribution.window_minutes == 15.0
    assert dict(cfg.spark) == {"spark.sql.shuffle.partitions": "8"}


def test_spark_keys_may_leave_out_their_spark_prefix():
    # `--set spark.driver.memory=2g` once became the key "driver.memory", which Spark ignores with a warning
    cfg = load_config(None, ["spark.driver.memory=2g", "spark.spark.sql.shuffle.partitions=8"])
    assert dict(cfg.spark) == {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "8"}


def test_config_file_then_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[ranking]\nlist_unit = "session"\n[metrics]\nk = [3]\n')
    cfg = load_config(path, ["metrics.k=[7]"])
    assert cfg.ranking.list_unit == "session" and cfg.metrics.k == (7,)


@pytest.mark.parametrize(
    "override, message",
    [
        ("metrics.kk=[1]", "unknown config key: metrics.kk"),
        ("nosuch.thing=1", "unknown config key: nosuch"),
        ("metrics.k=ten", "config key metrics.k"),
        ("metrics.k=[0, 5]", "config key metrics.k"),
        ("ranking.list_unit=page", "config key ranking.list_unit"),
        ("labels.event_weights={click = -1}", "config key labels.event_weights"),
        ("attribution.window_minutes=0", "config key attribution.window_minutes"),
        ("ope.min_matched_share=0", "config key ope.min_matched_share"),
        ("ope.min_matched_share=1.5", "config key ope.min_matched_share"),
        ("novalue", "--set expects KEY=VALUE"),
    ],
)
def test_bad_settings_fail_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_config(None, [override])


def test_fingerprint_changes_with_settings():
    assert Config().fingerprint() == load_config(None).fingerprint()
    assert Config().fingerprint() != load_config(None, ["metrics.k=[5]"]).fingerprint()


def _imports_after(code: str) -> set[str]:
    """The heavy libraries among the modules a fresh interpreter holds after ``code``."""
    probe = f"import sys; {code}; print(' '.join(m for m in ('scipy', 'pandas', 'pyspark') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_loading_the_config_imports_no_scipy_pandas_or_pyspark():
    # a command checks its config before the JVM starts: scipy's half second belongs after it (evaluate
    # imports it while the JVM starts, cli.common.import_meanwhile)
    assert _imports_after("from recsys_spark.config import load_config; load_config(None)") == set()
    kernels = "import recsys_spark.kernels.experiments, recsys_spark.kernels.assignment_checks as k"
    assert _imports_after(f"{kernels}; k.srm_test([5, 6], [1, 1])") == {"scipy"}


# --- inputs as teams have them (issue 42) -------------------------------------------------------------------------
def test_each_input_may_map_its_own_columns_over_the_shared_mapping(tmp_path):
    # one mapping served every input: exposures' shown_at and clicks' clicked_at could not both be the ts
    toml = tmp_path / "team.toml"
    toml.write_text(
        '[input.columns]\nuser_id = "uid"\n'
        '[input.columns.exposures]\nts = "shown_at"\n'
        '[input.columns.clicks]\nts = "clicked_at"\nuser_id = "visitor"\n'
    )
    cfg = load_config(toml, ['input.columns.items.category = "cat"'])
    assert cfg.input.columns_for("exposures") == {"user_id": "uid", "ts": "shown_at"}
    assert cfg.input.columns_for("clicks") == {"user_id": "visitor", "ts": "clicked_at"}  # the input's own wins
    assert cfg.input.columns_for("items") == {"user_id": "uid", "category": "cat"}
    assert cfg.input.columns_for("users") == cfg.input.columns_for(None) == {"user_id": "uid"}
    assert cfg.to_dict()["input"]["columns"]["clicks"] == {"ts": "clicked_at", "user_id": "visitor"}
    shared = load_config(None, ['input.columns={user_id = "uid"}'])  # the shared mapping alone, as before
    assert shared.input.columns_for("clicks") == {"user_id": "uid"}


@pytest.mark.parametrize(
    "override, message",
    [
        ('input.columns.exposures="shown_at"', r"input.columns.exposures: expected the exposures input's own mapping"),
        (
            'input.columns={logs = {ts = "t"}}',
            r"input.columns.logs: a table maps one input's columns, and 'logs' is no",
        ),
        ("input.columns.clicks={ts = 1}", r"input.columns.clicks.ts: expected the input's column name"),
        ("input.position_base=2", r"input.position_base: expected one of 0, 1, got 2"),
        ("input.position_base=-1", r"input.position_base: expected one of 0, 1"),
        ('input.position_base="0"', r"input.position_base: expected an integer"),
    ],
)
def test_a_bad_column_mapping_or_position_base_fails_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(None, [override])
    assert err.value.exit_code == 3


def test_position_base_is_0_or_1_and_1_by_default():
    assert Config().input.position_base == 1
    assert load_config(None, ["input.position_base=0"]).input.position_base == 0
