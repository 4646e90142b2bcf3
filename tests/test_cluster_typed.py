"""The cluster documents' typed bodies read a value of the wrong type as a DocumentError
that names it (model/narrow.py), and the ranks' plan as a one-line BadSpec; what they
read gives back what was stored."""

import copy
import json
from pathlib import Path

import pytest

from beoperf import errors, model
from beoperf.analysis import scaling
from beoperf.model.cluster import ClusterRun, ScalingStudy
from beoperf.model.cluster_mpi import MpiRun
from beoperf.model.document import Document, DocumentError
from beoperf.suites import cluster_mbw, cluster_pairs, cluster_ring
from beoperf.suites.cluster_mpi import Common, Plan, Where, plan_of

FIXTURES = Path(__file__).parent / "fixtures" / "documents"


def body_of(name: str) -> dict:
    return copy.deepcopy(model.load(FIXTURES / name).body)


@pytest.mark.parametrize(("path", "value", "named"), [
    (("np",), "2", "np: expected an integer, found str"),
    (("hpcc", "blas"), ["OpenBLAS"], "hpcc.blas: expected an object, found list"),
    (("launch", "argv"), "mpirun -np 2", "launch.argv: expected a list, found str"),
    (("checks", "hpl_verdicts"), [1], "checks.hpl_verdicts[0]: expected true or false"),
    (("metrics", "HPL_Tflops", "value"), True, "metrics.HPL_Tflops.value: expected a number"),
])
def test_a_cluster_body_with_a_value_of_the_wrong_type_is_named(path, value, named):
    body = body_of("cluster-v1-issue14.json")
    assert ClusterRun.from_body(body).body() == body
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(DocumentError, match=named.replace("[", r"\[").replace("]", r"\]")):
        ClusterRun.from_body(body)
    # a study made of it says the same, not a KeyError or TypeError from its insides
    with pytest.raises(DocumentError, match=path[0]):
        scaling.scaling_body([scaling.RunRef(body)], "t")


@pytest.mark.parametrize(("name", "where"), [
    ("cluster-pairs-v1-issue14.json", ("pairs", 0, "latency_s", "median")),
    ("cluster-pairs-v1-issue14.json", ("findings", "slow_nodes")),
    ("cluster-ring-v1-issue14.json", ("repeats", 0, "rings", 0, "trials", 0, "reps")),
    ("cluster-mbw-v1-issue14.json", ("points", 0, "pair_Bps", "sum")),
    ("cluster-mbw-v1-issue14.json", ("ranks", 0, "cpus")),
])
def test_a_series_with_a_value_of_the_wrong_type_is_named(name, where):
    stored = model.load(FIXTURES / name)
    body = copy.deepcopy(stored.body)
    node = body["series"][0]
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = "x"
    with pytest.raises(DocumentError, match=str(where[-1])):
        MpiRun.from_body(stored.kind, body)


def test_a_scaling_study_with_a_value_of_the_wrong_type_is_named():
    body = body_of("scaling-v1-issue14.json")
    body["rules"]["efficiency"] = "three quarters"
    with pytest.raises(DocumentError, match="rules.efficiency: expected a number, found str"):
        ScalingStudy.from_document(Document("scaling", body))


def test_the_typed_settings_of_another_kind_are_refused():
    run = MpiRun.from_document(model.load(FIXTURES / "cluster-ring-v1-issue14.json"))
    assert run.ring().latency_bytes == run.body()["definition"]["latency_bytes"]
    with pytest.raises(DocumentError, match="not an all-pairs test"):
        run.pairs()


@pytest.mark.parametrize("suite", [cluster_ring, cluster_pairs, cluster_mbw])
def test_a_plan_goes_through_its_json_unchanged(suite):
    spec = suite.Spec(common=Common(seed=7, label="x", command_line=("beoperf", "cluster")))
    plan = plan_of(suite.TEST.name, suite.params(spec).to_dict(), spec.common,
                   Where(("n1", "n2"), "--hosts", False), 2)
    text = json.dumps(plan.to_dict())
    again = Plan.from_dict(json.loads(text))
    assert again == plan
    assert suite.Params.from_dict(again.params) == suite.params(spec)


@pytest.mark.parametrize(("key", "value"), [("integrity", "yes"), ("nodes", "n1,n2"),
                                            ("loop", None), ("ranks_per_node", 1.5)])
def test_a_plan_with_a_value_of_the_wrong_type_is_a_one_line_bad_spec(key, value):
    spec = cluster_ring.Spec(common=Common(seed=7))
    plan = plan_of("ring", cluster_ring.params(spec).to_dict(), spec.common,
                   Where((), "this host", False), 2).to_dict()
    plan[key] = value
    with pytest.raises(errors.BadSpec, match=f"not a plan: {key}: expected") as caught:
        cluster_ring.rank(plan)
    assert "\n" not in str(caught.value)
