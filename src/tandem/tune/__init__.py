"""tandem.tune: search spaces, searchers, trial schedulers and the Tuner; every trial is a train job."""
