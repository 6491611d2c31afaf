"""The estimators take pandas category, object and string columns, one-hot encoded with the fit data's categories,
and name the column in every conversion error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppsvm import DpHybridClassifier, RandomKernelClassifier, RandomKernelRegressor
from ppsvm.api.columns import ColumnEncoding
from ppsvm.errors import DataError


def patients(m: int = 80, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.normal(50, 10, m),
            "bmi": rng.normal(25, 4, m),
            "sex": pd.Categorical(rng.choice(["M", "F"], m)),
            "site": rng.choice(["north", "east", "west"], m).astype(object),
            "smoker": pd.array(rng.choice(["yes", "no"], m), dtype="string"),
        }
    )
    labels = np.where((frame["age"] > 50) | (frame["smoker"] == "yes"), "sick", "healthy")
    return frame, labels


def test_encoding_one_hot_encodes_categories_sorted_and_keeps_numbers() -> None:
    frame, _ = patients(12)
    encoding = ColumnEncoding.fit(frame)
    assert encoding.names == ("age", "bmi", "sex", "site", "smoker")
    assert encoding.categories == (None, None, ("F", "M"), ("east", "north", "west"), ("no", "yes"))
    X = encoding.encode(frame)
    assert X.shape == (12, 9)
    np.testing.assert_array_equal(X[:, :2], frame[["age", "bmi"]].to_numpy())
    np.testing.assert_array_equal(X[:, 2:4], np.column_stack([frame["sex"] == "F", frame["sex"] == "M"]))
    np.testing.assert_array_equal(X[:, 2:].sum(axis=1), 3)
    assert [block.tolist() for block in encoding.blocks()] == [[0], [1], [2, 3], [4, 5, 6], [7, 8]]


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("site", "south", r"column 'site', row 3: 'south' is not a category of the fit data \('east', 'north'"),
        ("site", None, "column 'site', row 3: a missing value"),
        ("age", "old", "column 'age', row 3: 'old' is not a number"),
        ("bmi", np.nan, r"column 'bmi', row 3: a missing value \(NaN\)"),
        ("bmi", np.inf, "column 'bmi', row 3: inf is not a finite number"),
    ],
)
def test_every_conversion_error_names_the_column_row_and_value(column: str, value: object, message: str) -> None:
    frame, _ = patients(6)
    encoding = ColumnEncoding.fit(frame)
    bad = frame.astype({column: object})
    bad.loc[3, column] = value
    with pytest.raises(DataError, match=message):
        encoding.encode(bad)


def test_a_category_column_declares_categories_its_records_lack() -> None:
    frame, _ = patients(12)
    frame["sex"] = pd.Categorical(frame["sex"].astype(str), categories=["M", "F", "X"])
    encoding = ColumnEncoding.fit(frame)
    assert encoding.categories[2] == ("F", "M", "X")
    later = frame.copy()
    later.loc[0, "sex"] = "X"  # met only after the fit, yet declared: encoded, not refused
    assert encoding.encode(later)[0, 2:5].tolist() == [0.0, 0.0, 1.0]


def test_a_missing_category_at_fit_is_refused_naming_it() -> None:
    frame, labels = patients()
    frame.loc[5, "site"] = None
    with pytest.raises(DataError, match="column 'site', row 5: a missing value"):
        RandomKernelClassifier(random_state=0).fit(frame, labels)


def test_the_classifier_fits_and_predicts_a_frame_with_categories() -> None:
    frame, labels = patients()
    blocks = [["age", "sex", "smoker"], ["bmi", "site"]]
    model = RandomKernelClassifier(column_blocks=blocks, nu=1.0, mu=0.5, random_state=0).fit(frame, labels)
    assert model.n_features_in_ == 5
    assert model.feature_names_in_.tolist() == ["age", "bmi", "sex", "site", "smoker"]
    # Encoded columns: age 0, bmi 1, sex 2-3, site 4-6, smoker 7-8; a category's columns stay in its block.
    assert [block.tolist() for block in model.column_blocks_] == [[0, 2, 3, 7, 8], [1, 4, 5, 6]]
    predicted = model.predict(frame)
    assert set(predicted.tolist()) <= {"sick", "healthy"}
    np.testing.assert_array_equal(model.predict(frame.to_numpy(dtype=object)), predicted)  # by position
    unseen = frame.copy()
    unseen["smoker"] = unseen["smoker"].astype(object)
    unseen.loc[2, "smoker"] = "sometimes"
    with pytest.raises(DataError, match="column 'smoker', row 2: 'sometimes' is not a category"):
        model.predict(unseen)
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame[["bmi", "age", "sex", "site", "smoker"]])


def test_the_regressor_and_numeric_frames_work_as_before() -> None:
    frame, _ = patients()
    numbers = frame[["age", "bmi"]].assign(weight=frame["bmi"] * 3)
    target = numbers["age"].to_numpy() / 10
    fitted = RandomKernelRegressor(nu=1.0, mu=0.5, random_state=0).fit(numbers, target)
    assert fitted.columns_.categories == (None, None, None)
    np.testing.assert_array_equal(fitted.predict(numbers), fitted.predict(numbers.to_numpy()))
    arrays = RandomKernelRegressor(nu=1.0, mu=0.5, random_state=0).fit(numbers.to_numpy(), target)
    assert arrays.columns_ is None
    np.testing.assert_allclose(arrays.predict(numbers.to_numpy()), fitted.predict(numbers))


def test_the_dp_classifier_takes_categories_too() -> None:
    frame, labels = patients(120)
    model = DpHybridClassifier(method="public-only", n_frequencies=10, public_size=60, random_state=0)
    model.fit(frame, labels)
    assert model.feature_names_in_.tolist() == ["age", "bmi", "sex", "site", "smoker"]
    assert model.decision_function(frame).shape == (120,)
    bad = frame.astype({"sex": object})
    bad.loc[0, "sex"] = "X"
    with pytest.raises(DataError, match="column 'sex', row 0: 'X' is not a category"):
        model.predict(bad)
