"""tools/ab_compare.py: medians over runs of two builds' collectives-benchmark rows."""

import importlib.util
import json
from pathlib import Path

spec = importlib.util.spec_from_file_location("ab_compare", Path(__file__).parents[2] / "tools" / "ab_compare.py")
ab_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab_compare)


def _run(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text(json.dumps({"rows": [dict(op=op, group=g, system=s, time_us=t, host_us=h, wrong=w)
                                         for op, g, s, t, h, w in rows]}))
    return str(path)


def test_medians_ratios_one_sided_rows_and_wrong_flags(tmp_path):
    base = [_run(tmp_path, "b1.json", [("ag", "g", "tide_ag", 100.0, 50.0, 0), ("rs", "g", "old_only", 1.0, 1.0, 0)]),
            _run(tmp_path, "b2.json", [("ag", "g", "tide_ag", 120.0, 70.0, 0)]),
            _run(tmp_path, "b3.json", [("ag", "g", "tide_ag", 300.0, 60.0, 0)])]
    new = [_run(tmp_path, "n1.json", [("ag", "g", "tide_ag", 90.0, 30.0, 0), ("rs", "g", "tide_rs", 5.0, 2.0, 3)]),
           _run(tmp_path, "n2.json", [("ag", "g", "tide_ag", 60.0, 30.0, 0), ("rs", "g", "old_only", 1.0, 1.0, 0)])]
    lines = ab_compare.compare(ab_compare.load(base), ab_compare.load(new))
    by_system = {line.split()[2]: line for line in lines[1:]}
    ag = by_system["tide_ag"].split()
    # base medians 120 / 60, new medians 75 / 30
    assert [float(x) for x in ag[3:9]] == [120.0, 75.0, 0.625, 60.0, 30.0, 0.5]
    assert "only in new" in by_system["tide_rs"]
    assert "#wrong" not in by_system["old_only"]  # in both sets, right in both


def test_a_wrong_row_is_flagged_and_bad_arguments_are_refused(tmp_path, capsys):
    base = [_run(tmp_path, "b.json", [("rs", "g", "tide_rs", 5.0, 2.0, 0)])]
    new = [_run(tmp_path, "n.json", [("rs", "g", "tide_rs", 5.0, 2.0, 1)])]
    lines = ab_compare.compare(ab_compare.load(base), ab_compare.load(new))
    assert lines[1].endswith("#wrong > 0")
    assert ab_compare.main(base) == 2
    assert ab_compare.main(["--", *new]) == 2
    assert ab_compare.main([*base, "--", *new]) == 0
    assert "tide_rs" in capsys.readouterr().out
