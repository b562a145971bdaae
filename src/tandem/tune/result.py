"""``ray.tune.result``'s path: the names of the keys in a result row and of the files a trial
writes, with Ray's values.

tandem fills ``training_iteration``, ``time_total_s``, ``trial_id`` (and ``done`` at the end)
in every row. A row (or, in a ``tune.Callback.on_trial_result``, the result dict) with
``should_checkpoint=True`` makes a ``Trainable`` class save a checkpoint at that iteration.
A function trainable that returns or yields a number reports it as ``DEFAULT_METRIC``. The
``EXPR_*`` names are the files of a trial folder (tandem writes ``params.json``,
``result.json``, ``progress.csv`` and ``error.txt``; the pickle names are Ray's).
"""

from __future__ import annotations

# files of a trial folder (ray.air.constants)
EXPR_PARAM_FILE = "params.json"
EXPR_PARAM_PICKLE_FILE = "params.pkl"
EXPR_PROGRESS_FILE = "progress.csv"
EXPR_RESULT_FILE = "result.json"
EXPR_ERROR_PICKLE_FILE = "error.pkl"
EXPR_ERROR_FILE = "error.txt"
TIMESTAMP = "timestamp"
TIME_THIS_ITER_S = "time_this_iter_s"
TRAINING_ITERATION = "training_iteration"

# (Optional/Auto-filled) training is terminated. Filled only if not provided.
DONE = "done"
# (Optional) Enum for user controlled checkpoint
SHOULD_CHECKPOINT = "should_checkpoint"
# (Auto-filled) The hostname of the machine hosting the training process.
HOSTNAME = "hostname"
# (Auto-filled) The auto-assigned id of the trial.
TRIAL_ID = "trial_id"
# (Auto-filled) The auto-assigned id of the trial.
EXPERIMENT_TAG = "experiment_tag"
# (Auto-filled) The node ip of the machine hosting the training process.
NODE_IP = "node_ip"
# (Auto-filled) The pid of the training process.
PID = "pid"
# (Optional) Default (anonymous) metric when using tune.report(x)
DEFAULT_METRIC = "_metric"
# (Optional) Mean reward for current training iteration
EPISODE_REWARD_MEAN = "episode_reward_mean"
# (Optional) Mean loss for training iteration
MEAN_LOSS = "mean_loss"
# (Optional) Mean accuracy for training iteration
MEAN_ACCURACY = "mean_accuracy"
# Number of episodes in this iteration.
EPISODES_THIS_ITER = "episodes_this_iter"
# (Optional/Auto-filled) Accumulated number of episodes for this trial.
EPISODES_TOTAL = "episodes_total"
# Number of timesteps in this iteration.
TIMESTEPS_THIS_ITER = "timesteps_this_iter"
# (Auto-filled) Accumulated number of timesteps for this entire trial.
TIMESTEPS_TOTAL = "timesteps_total"
# (Auto-filled) Accumulated time in seconds for this entire trial.
TIME_TOTAL_S = "time_total_s"

DEFAULT_EXPERIMENT_INFO_KEYS = ("trainable_name", EXPERIMENT_TAG, TRIAL_ID)

DEFAULT_RESULT_KEYS = (
    TRAINING_ITERATION,
    TIME_TOTAL_S,
    MEAN_ACCURACY,
    MEAN_LOSS,
)

# Metrics that don't require at least one iteration to complete
DEBUG_METRICS = (
    TRIAL_ID,
    "experiment_id",
    "date",
    TIMESTAMP,
    PID,
    HOSTNAME,
    NODE_IP,
    "config",
)

AUTO_RESULT_KEYS = (
    TRAINING_ITERATION,
    TIME_TOTAL_S,
    EPISODES_TOTAL,
    TIMESTEPS_TOTAL,
    NODE_IP,
    HOSTNAME,
    PID,
    TIME_TOTAL_S,
    TIME_THIS_ITER_S,
    TIMESTAMP,
    "date",
    "time_since_restore",
    "timesteps_since_restore",
    "iterations_since_restore",
    "config",
    "checkpoint_dir_name",
)

# Ray's magic keys of its function API (a duplicated last result, trial info, log files)
RESULT_DUPLICATE = "__duplicate__"
TRIAL_INFO = "__trial_info__"
STDOUT_FILE = "__stdout_file__"
STDERR_FILE = "__stderr_file__"

DEFAULT_EXPERIMENT_NAME = "default"
# Meta files under an experiment / trial folder (Ray's names)
JOB_META_FILE = "job_status.json"
EXPR_META_FILE = "trial_status.json"
# Config prefix when using ExperimentAnalysis.
CONFIG_PREFIX = "config"

__all__ = [n for n in dir() if n.isupper()]
