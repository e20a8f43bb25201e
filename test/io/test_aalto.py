"""The Aalto reader: real data where present, and a tiny hand-written data set that always runs."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.io import DatasetError, load_aalto_sequence

from .helpers import write_csv, write_tiny_aalto

# invensense sequence 3, as listed in the shared data README (rows per sequence).
SEQ3_ROWS = 9404


def test_real_sequence_keeps_the_first_row(magnetic_dir: Path) -> None:
    seq = load_aalto_sequence(magnetic_dir, "invensense", 3)
    assert seq.time_s.shape == (SEQ3_ROWS,)
    assert seq.loc_m.shape == (SEQ3_ROWS, 2)
    assert seq.mag_ut.shape == (SEQ3_ROWS, 3)
    assert all(a.dtype == np.float64 for a in seq)
    # The files have no header row: the first line is a sample and must not be lost.
    folder = magnetic_dir / "invensense"
    first = [
        float(v)
        for kind in ("time", "loc", "mag")
        for v in (folder / f"3-{kind}.csv").read_text().splitlines()[0].split(",")
    ]
    np.testing.assert_array_equal(np.r_[seq.time_s[0], seq.loc_m[0], seq.mag_ut[0]], first)
    np.testing.assert_allclose(np.diff(seq.time_s), 0.02, atol=1e-9)
    assert 20.0 < float(np.linalg.norm(seq.mag_ut, axis=1).mean()) < 80.0  # µT, not tesla


def test_tiny_set_drops_nan_rows_and_counts_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written = write_tiny_aalto(tmp_path, nan_row=3)
    with caplog.at_level(logging.WARNING, logger="gp_mapper.io.aalto"):
        seq = load_aalto_sequence(tmp_path, "invensense", 2)
    keep = np.ones(written[2].time_s.size, bool)
    keep[3] = False
    np.testing.assert_array_equal(seq.time_s, written[2].time_s[keep])
    np.testing.assert_array_equal(seq.loc_m, written[2].loc_m[keep])
    np.testing.assert_array_equal(seq.mag_ut, written[2].mag_ut[keep])
    assert "dropped 1 non-finite rows" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gp_mapper.io.aalto"):
        clean = load_aalto_sequence(tmp_path, "invensense", 1)
    assert clean.time_s.size == written[1].time_s.size
    assert caplog.text == ""


def test_missing_directory_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError, match=re.escape(f"{missing} does not exist")):
        load_aalto_sequence(missing)


def test_missing_sensor_lists_what_exists(tmp_path: Path) -> None:
    write_tiny_aalto(tmp_path, sensor="nexus")
    with pytest.raises(DatasetError, match=r"no sensor folder 'invensense'.*\['nexus'\]"):
        load_aalto_sequence(tmp_path, "invensense", 1)


def test_a_clone_of_the_dataset_is_found_through_its_data_folder(tmp_path: Path) -> None:
    written = write_tiny_aalto(tmp_path / "data")
    seq = load_aalto_sequence(tmp_path, "invensense", 1)
    np.testing.assert_array_equal(seq.mag_ut, written[1].mag_ut)


def test_missing_sequence_names_the_file_and_the_sequences_present(tmp_path: Path) -> None:
    write_tiny_aalto(tmp_path)
    with pytest.raises(DatasetError, match=r"missing 7-time\.csv .*sequences there: \[1, 2\]"):
        load_aalto_sequence(tmp_path, "invensense", 7)
    (tmp_path / "invensense" / "2-mag.csv").unlink()
    with pytest.raises(DatasetError, match=r"missing 2-mag\.csv .*sequences there: \[1\]"):
        load_aalto_sequence(tmp_path, "invensense", 2)


def test_row_count_mismatch_is_reported(tmp_path: Path) -> None:
    written = write_tiny_aalto(tmp_path)
    write_csv(tmp_path / "invensense" / "1-loc.csv", written[1].loc_m[:-2])
    with pytest.raises(DatasetError, match=r"different row counts .*1-loc\.csv: 28"):
        load_aalto_sequence(tmp_path, "invensense", 1)


def test_header_row_wrong_columns_and_empty_files_are_rejected(tmp_path: Path) -> None:
    written = write_tiny_aalto(tmp_path)
    folder = tmp_path / "invensense"
    path = folder / "1-loc.csv"
    path.write_text("x,y\n" + path.read_text())
    with pytest.raises(DatasetError, match=r"1-loc\.csv: not a header-less numeric CSV"):
        load_aalto_sequence(tmp_path, "invensense", 1)
    write_csv(path, np.column_stack([written[1].loc_m, written[1].loc_m[:, :1]]))
    with pytest.raises(DatasetError, match=r"1-loc\.csv: expected 2 columns, found 3"):
        load_aalto_sequence(tmp_path, "invensense", 1)
    (folder / "2-time.csv").write_text("\n")
    with pytest.raises(DatasetError, match=r"2-time\.csv: file is empty"):
        load_aalto_sequence(tmp_path, "invensense", 2)


def test_time_must_increase(tmp_path: Path) -> None:
    written = write_tiny_aalto(tmp_path)
    time_s = written[1].time_s.copy()
    time_s[10] = time_s[9]
    write_csv(tmp_path / "invensense" / "1-time.csv", time_s[:, None])
    with pytest.raises(DatasetError, match="time does not increase at finite row 10"):
        load_aalto_sequence(tmp_path, "invensense", 1)
