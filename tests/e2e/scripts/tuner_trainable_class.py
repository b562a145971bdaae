"""A Tuner over a tune.Trainable class, stopped at 4 iterations, checkpointing."""

import os

from tandem import tune


class Quadratic(tune.Trainable):
    def setup(self, config):
        self.x = config["x"]
        self.steps = 0

    def step(self):
        self.steps += 1
        return {"loss": (self.x - 2) ** 2 + 1.0 / self.steps}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "steps.txt"), "w") as f:
            f.write(str(self.steps))

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "steps.txt")) as f:
            self.steps = int(f.read())


results = tune.Tuner(
    Quadratic,
    param_space={"x": tune.grid_search([1, 2, 3])},
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
    run_config=tune.RunConfig(name="tuner_class", stop={"training_iteration": 4}, verbose=0,
                              checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2)),
).fit()
best = results.get_best_result()
print("ERRORS", results.num_errors)
print("ITERATIONS", sorted(r.metrics["training_iteration"] for r in results))
print("BEST", best.config["x"], round(best.metrics["loss"], 4))
with open(os.path.join(best.checkpoint.path, "steps.txt")) as f:
    print("CHECKPOINT_STEPS", f.read())
