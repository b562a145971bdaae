"""`tandem server start --scheduling/--quotas`: the flags become the job service's policy."""

from __future__ import annotations

import argparse

import pytest

from tandem._core.errors import ConfigError
from tandem.jobs.admission import FairSharePolicy, PriorityPreemptionPolicy, Quota
from tandem.jobs.scheduler import GangScheduler
from tandem.server.daemon import add_server_args, config_from_args, server_argv


def parse(*argv):
    p = argparse.ArgumentParser()
    add_server_args(p)
    return p.parse_args(list(argv))


def test_flags_make_the_policy_and_survive_a_restart_of_the_daemon():
    a = parse("--scheduling", "priority", "--quotas", '{"alice": {"cpus": 8}, "*": {"gpus": 1}}')
    policy = config_from_args(a).admission_policy()
    assert isinstance(policy, PriorityPreemptionPolicy)
    assert policy.quotas.of("alice") == Quota(cpus=8) and policy.quotas.of("bob") == Quota(gpus=1)
    argv = server_argv(a)
    assert argv[argv.index("--scheduling") + 1] == "priority" and "--quotas" in argv
    assert isinstance(config_from_args(parse("--scheduling", "fair")).admission_policy(),
                      FairSharePolicy)
    default = config_from_args(parse()).admission_policy()
    assert isinstance(default, GangScheduler)  # no flags: the server behaves as before
    assert "--scheduling" not in server_argv(parse())


@pytest.mark.parametrize("argv, match", [
    (("--quotas", '{"alice": {"cpus": 8}}'), "needs --scheduling fair or priority"),
    (("--scheduling", "fair", "--quotas", "[1]"), "not a JSON object"),
    (("--scheduling", "fair", "--quotas", '{"alice": {"cpu": 8}}'), "unknown key"),
])
def test_bad_quota_flags_are_refused_before_the_server_starts(argv, match):
    with pytest.raises(ConfigError, match=match):
        config_from_args(parse(*argv))
