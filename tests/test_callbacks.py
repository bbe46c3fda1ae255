"""The callback contract of ``train`` (XGBoost's): ``before_training`` and
``after_training`` return the model the fit goes on with."""
import numpy as np

import bonsai


def test_train_returns_what_the_callbacks_return():
    """XGBoost's callback contract: before_training / after_training return the model
    the fit goes on with, and train returns what the last after_training gave."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4))
    y = 10.0 + X[:, 0]

    class Swap(bonsai.TrainingCallback):
        def before_training(self, model):
            self.seen = model
            return model

        def after_training(self, model):
            other = bonsai.Booster(model_str=model.model_to_string())
            other.extra["swapped"] = True
            return other

    cb = Swap()
    b = bonsai.train({"max_depth": 3}, bonsai.Dataset(X, label=y), num_boost_round=2,
                     callbacks=[cb])
    assert b.extra.get("swapped") is True and b is not cb.seen
    assert b.num_boosted_rounds() == 2
