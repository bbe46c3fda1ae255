"""Write the model files this release keeps for later releases to load
(``tests/test_model_io.py::test_models_written_by_earlier_releases_load``).

Run once per release that changes the model schema, from the repository root::

    python tests/data/models/make_model_files.py

Each ``<name>.json`` model comes with ``<name>.npz``: the rows it predicts (``X``, with
NaN; categorical columns as category codes in ``codes`` for the categorical model) and
what this release predicted for them (``margin``, ``pred``).  Files already here are
never rewritten: they are what an earlier release wrote.
"""
import os

import numpy as np
import pandas as pd

import bonsai

HERE = os.path.dirname(os.path.abspath(__file__))


def _numeric():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(600, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.isnan(X[:, 1]) + 0.3 * rng.normal(size=600) > 0.4) * 1.0
    b = bonsai.train({"objective": "binary", "grow_policy": "leafwise", "max_leaves": 6,
                      "n_estimators": 5, "learning_rate": 0.5}, bonsai.Dataset(X, label=y))
    return b, X, None


def _categorical():
    rng = np.random.default_rng(12)
    n = 600
    codes = rng.integers(0, 6, size=(n, 2))
    cats = [["a", "b", "c", "d", "e", "f"], ["u", "v", "w", "x", "y", "z"]]
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "c0": pd.Categorical.from_codes(codes[:, 0], cats[0]),
                       "c1": pd.Categorical.from_codes(codes[:, 1], cats[1])})
    y = ((codes[:, 0] % 2) + df["x"].to_numpy() + (codes[:, 1] == 3)
         + 0.2 * rng.normal(size=n)).astype(float)
    b = bonsai.train({"objective": "squared_error", "n_estimators": 5, "max_depth": 3,
                      "learning_rate": 0.5, "min_data_per_group": 5},
                     bonsai.Dataset(df, label=y))
    return b, df, codes


def main():
    for name, make in (("bonsai-0.1.0-binary", _numeric),
                       ("bonsai-0.1.0-categorical", _categorical)):
        path = os.path.join(HERE, name + ".json")
        if os.path.exists(path):
            print(f"{path} exists: kept")
            continue
        b, X, codes = make()
        b.save_model(path)
        arrays = {"margin": b.predict(X, output_margin=True), "pred": b.predict(X)}
        if codes is None:
            arrays["X"] = X
        else:
            arrays["X"] = X["x"].to_numpy()
            arrays["codes"] = codes
        np.savez_compressed(os.path.join(HERE, name + ".npz"), **arrays)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
