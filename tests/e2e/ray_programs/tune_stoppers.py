# Stop criteria as Ray Tune's user guide ("How to Define Stopping Criteria for a Ray Tune
# Experiment") and its tune.stopper API describe them: a dict, a function, a custom Stopper
# with stop_all, and the built-in TrialPlateauStopper / ExperimentPlateauStopper /
# MaximumIterationStopper / CombinedStopper. Written for this repository; the same program
# with `ray` in place of `tandem` in the imports prints the same lines on Ray 2.60.
from tandem import tune
from tandem.tune import Stopper
from tandem.tune.stopper import (
    CombinedStopper,
    ExperimentPlateauStopper,
    MaximumIterationStopper,
    TrialPlateauStopper,
)


def my_trainable(config):
    i = 1
    while True:  # runs until a stopping criterion ends it
        tune.report({"mean_accuracy": min(i / 10, 1.0)})
        i += 1


def final_iterations(result_grid):
    return sorted(r.metrics.get("training_iteration", 0) for r in result_grid)


def fit(stop, num_samples=1):
    tuner = tune.Tuner(
        my_trainable,
        run_config=tune.RunConfig(stop=stop, verbose=0),
        tune_config=tune.TuneConfig(num_samples=num_samples),
    )
    return tuner.fit()


grid = fit({"training_iteration": 10, "mean_accuracy": 0.8})
print("DICT", final_iterations(grid))


def stop_fn(trial_id: str, result: dict) -> bool:
    return result["mean_accuracy"] >= 0.8 or result["training_iteration"] >= 10


print("FUNCTION", final_iterations(fit(stop_fn)))


class CustomStopper(Stopper):
    def __init__(self):
        self.should_stop = False

    def __call__(self, trial_id: str, result: dict) -> bool:
        if not self.should_stop and result["mean_accuracy"] >= 0.8:
            self.should_stop = True
        return self.should_stop

    def stop_all(self) -> bool:
        return self.should_stop


grid = fit(CustomStopper(), num_samples=2)
print("CUSTOM_AT_MOST_8", all(i <= 8 for i in final_iterations(grid)))

# the accuracy stays at 1.0 from iteration 10: four equal results in a row are a plateau
print("TRIAL_PLATEAU", final_iterations(fit(TrialPlateauStopper(metric="mean_accuracy"))))
print("MAX_ITER", final_iterations(fit(MaximumIterationStopper(max_iter=5), num_samples=2)))
combined = CombinedStopper(MaximumIterationStopper(max_iter=30),
                           TrialPlateauStopper(metric="mean_accuracy", num_results=6))
print("COMBINED", final_iterations(fit(combined)))
# the ten best accuracies of the experiment are all 1.0 from the tenth 1.0 on: it stops
grid = fit(ExperimentPlateauStopper(metric="mean_accuracy", mode="max", top=10))
print("EXPERIMENT_PLATEAU", final_iterations(grid))
