"""The older entry point: tune.run over a function and over a Trainable with underscore
methods, returning an analysis object."""

import os

from tandem import tune


def objective(config):
    for i in range(3):
        tune.report(loss=(config["x"] - 1) ** 2 + 1.0 / (i + 1))


analysis = tune.run(objective, config={"x": tune.grid_search([0, 1, 2])}, metric="loss",
                    mode="min", name="tune_run_fn", verbose=0)
print("BEST_CONFIG", analysis.get_best_config(metric="loss", mode="min"))
print("BEST_LOSS", round(analysis.best_result["loss"], 4))
print("ROWS", len(analysis.dataframe()))
print("TRIALS", len(analysis.trials))


class Old(tune.Trainable):
    def _setup(self, config):
        self.n = 0

    def _train(self):
        self.n += 1
        return {"score": self.n * self.config["k"]}

    def _save(self, checkpoint_dir):
        path = os.path.join(checkpoint_dir, "n")
        with open(path, "w") as f:
            f.write(str(self.n))
        return path

    def _restore(self, checkpoint):
        with open(checkpoint) as f:
            self.n = int(f.read())


analysis = tune.run(Old, config={"k": tune.grid_search([1, 2])}, stop={"training_iteration": 3},
                    checkpoint_freq=1, metric="score", mode="max", name="tune_run_cls", verbose=0)
print("CLASS_BEST", analysis.get_best_config(metric="score", mode="max"),
      analysis.best_result["score"])
