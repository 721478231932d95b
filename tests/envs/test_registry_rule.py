"""One rule for a name registered twice, in all five registries (environment ids, workflows,
verifiers, datasets, sandbox backends): an equal value is a no-op, a different one raises naming
the name and how to replace it, ``overwrite=True`` replaces it."""

import pytest

import marft_envs
import tasks
from marft_envs.code.sandbox import get_sandbox, register_backend
from marft_envs.code.sandbox.select import BACKENDS
from marft_envs.verifiers import _VERIFIERS
from marft_envs.workflow import _WORKFLOWS, Role, Workflow
from tasks import AlreadyRegisteredError, Loaded, Registry


def _taken(kind: str, name: str) -> str:
    return (
        f"{kind} {name!r} is already registered to a different value; pass overwrite=True to "
        "replace it, or choose another name"
    )


def _refused(fn, message):
    with pytest.raises(AlreadyRegisteredError) as e:
        fn()
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)  # what callers caught before the one rule


def test_the_registry_type_binds_a_name_once():
    r: Registry[object] = Registry("widget", {"a": 1})
    assert r.register("a", 1) == 1 and len(r) == 1  # equal: a no-op
    _refused(lambda: r.register("a", 2), _taken("Widget", "a"))
    with pytest.raises(AlreadyRegisteredError):
        r["a"] = 2  # item assignment follows the same rule
    assert r["a"] == 1
    assert r.register("a", 2, overwrite=True) == 2 and r["a"] == 2
    del r["a"]
    assert "a" not in r and r.get("a") is None
    with pytest.raises(KeyError, match="no widget 'a' is registered; registered: \\[\\]"):
        del r["a"]
    with pytest.raises(TypeError, match="a widget name must be a non-empty string, got ''"):
        r.register("", 3)


def test_equal_but_not_identical_values_are_a_no_op_and_keep_the_first():
    first, again = [1, 2], [1, 2]
    r: Registry[list[int]] = Registry("list", {"x": first})
    assert r.register("x", again) is first


def test_environment_ids():
    env_id = "rule-test-2agent"
    kwargs = {"dataset": "arith", "workflow": "math-dual"}
    marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv", kwargs=kwargs)
    try:
        # the same spec again (a module imported twice) is a no-op
        marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv", kwargs=dict(kwargs))
        _refused(
            lambda: marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv"),
            _taken("Environment id", env_id),
        )
        assert marft_envs.spec(env_id).kwargs == kwargs
        marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv", overwrite=True)
        assert marft_envs.spec(env_id).kwargs == {}
    finally:
        del marft_envs.registry[env_id]
    # the built-in registrations are idempotent under the rule
    before = dict(marft_envs.registry)
    marft_envs.register_builtin_envs()
    assert dict(marft_envs.registry) == before


def test_workflows():
    wf = Workflow("rule-test-solo", (Role("solver", "Solve."),))
    try:
        assert marft_envs.register_workflow(wf) is wf
        same = Workflow("rule-test-solo", (Role("solver", "Solve."),))
        assert marft_envs.register_workflow(same) is wf  # equal: a no-op that keeps the first
        other = Workflow("rule-test-solo", (Role("solver", "Solve it."),))
        _refused(lambda: marft_envs.register_workflow(other), _taken("Workflow", "rule-test-solo"))
        assert marft_envs.register_workflow(other, overwrite=True) is other
        assert marft_envs.get_workflow("rule-test-solo") is other
    finally:
        del _WORKFLOWS["rule-test-solo"]


class _VerifierA:
    def grade(self, response, task):
        raise NotImplementedError


class _VerifierB(_VerifierA):
    pass


def test_verifiers():
    """A second factory under a taken name used to replace the first silently."""
    marft_envs.register_verifier("rule-test", _VerifierA)
    try:
        marft_envs.register_verifier("rule-test", _VerifierA)
        _refused(
            lambda: marft_envs.register_verifier("rule-test", _VerifierB),
            _taken("Verifier", "rule-test"),
        )
        assert isinstance(marft_envs.get_verifier("rule-test"), _VerifierA)
        marft_envs.register_verifier("rule-test", _VerifierB, overwrite=True)
        assert isinstance(marft_envs.get_verifier("rule-test"), _VerifierB)
    finally:
        del _VERIFIERS["rule-test"]  # tests only: the registries have no public unregister


def _loader(split, data_dir):
    return Loaded([tasks.arith_task(1, 2)], "rule-test")


def test_datasets():
    def register(**kw):
        return tasks.register_dataset(
            "rule-test", _loader, splits=("test",), kind="math", needs_data=False, **kw
        )

    info = register(description="one")
    try:
        assert register(description="one") is info
        _refused(lambda: register(description="two"), _taken("Dataset", "rule-test"))
        assert register(description="two", overwrite=True).description == "two"
        assert tasks.dataset_info("rule-test").description == "two"
    finally:
        tasks.dataset._REGISTRY.pop("rule-test", None)


def test_sandbox_backends():
    entry = "marft_envs.code.sandbox.subprocess_backend:SubprocessSandbox"
    register_backend("rule-test", entry)
    try:
        register_backend("rule-test", entry)
        _refused(
            lambda: register_backend("rule-test", "marft_envs.code.sandbox.bwrap:BwrapSandbox"),
            _taken("Sandbox backend", "rule-test"),
        )
        assert get_sandbox("rule-test").name == "subprocess"  # a registered backend is usable
        with pytest.raises(ValueError, match="'nocolon' is not of the form 'module:Class'"):
            register_backend("rule-test-2", "nocolon")
    finally:
        del BACKENDS["rule-test"]
