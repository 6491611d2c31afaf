"""Per-organisation onboarding (ppsvm.onboarding, ppsvm.wire.shares): keys stay home, bundles hold only their own."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from ppsvm import onboarding
from ppsvm.config import FederationEntity, federation_toml, load_entity_config
from ppsvm.errors import ConfigError
from ppsvm.wire import shares
from ppsvm.wire.certs import certificate_party

ENTITIES = [FederationEntity(f"r{i}c{j}", f"10.0.{i}.{j + 1}:5005{i}", i, j) for i in range(2) for j in range(3)]
PARTIES = {**{e.id: "entity" for e in ENTITIES}, "coordinator": "coordinator", "client": "client"}


def _onboard(root: Path, *, join: bool = True) -> Path:
    """Every step of every party, each in its own directory; the relay is a directory of its own."""
    requests = [onboarding.init_party(root / name, name, role) for name, role in PARTIES.items()]  # type: ignore[arg-type]
    onboarding.init_operator(root / "operator", 30)
    plan = root / "operator" / "plan.toml"
    plan.write_text(federation_toml({"task": "classify", "kernel": "gaussian"}, ENTITIES), encoding="utf-8")
    onboarding.publish(
        root / "operator",
        plan,
        requests,
        root / "published",
        coordinator="coordinator",
        clients=["client"],
        valid_days=30,
    )
    for entity in ENTITIES:
        onboarding.seal_shares(root / entity.id, root / "published", root / "relay")
    if join:
        for name in PARTIES:
            onboarding.join(
                root / name, root / "published", root / "relay" if PARTIES[name] == "entity" else None, data="cell.csv"
            )
    return root


@pytest.fixture(scope="module")
def onboarded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _onboard(tmp_path_factory.mktemp("onboarding"))


def _secret(bundle: Path, filename: str) -> bytes:
    return (bundle / filename).read_bytes()


def test_members_agree_on_their_group_secrets_and_groups_differ(onboarded: Path) -> None:
    for j in range(3):
        members = [e.id for e in ENTITIES if e.column_block == j]
        values = {_secret(onboarded / m, f"column-block-{j}.secret") for m in members}
        assert len(values) == 1, f"column block {j}'s members hold different secrets"
    record_keys = {_secret(onboarded / e.id, "record-ids.key") for e in ENTITIES}
    assert len(record_keys) == 1
    distinct = {_secret(onboarded / f"r0c{j}", f"column-block-{j}.secret") for j in range(3)} | record_keys
    assert len(distinct) == 4


def test_each_pair_of_a_row_block_agrees_a_secret_no_third_entity_holds(onboarded: Path) -> None:
    """Secure aggregation's pair secrets: a row-block member must not be able to unmask another's share alone."""
    pair_files = {}
    for i in range(2):
        for a, b in ((0, 1), (0, 2), (1, 2)):
            name = f"pair-r{i}c{a}-r{i}c{b}.secret"
            values = {_secret(onboarded / f"r{i}c{a}", name), _secret(onboarded / f"r{i}c{b}", name)}
            assert len(values) == 1, f"{name} differs between its two members"
            pair_files[name] = {f"r{i}c{a}", f"r{i}c{b}"}
    assert len({_secret(onboarded / sorted(m)[0], name) for name, m in pair_files.items()}) == 6
    for entity in ENTITIES:
        held = {path.name for path in (onboarded / entity.id).glob("pair-*.secret")}
        assert held == {name for name, members in pair_files.items() if entity.id in members}
        config = load_entity_config(onboarded / entity.id / f"{entity.id}.toml")
        peers = {e.id for e in ENTITIES if e.row_block == entity.row_block and e.id != entity.id}
        assert set(config.read_pair_secrets()) == peers


def test_no_bundle_holds_another_party_s_key_or_another_group_s_secret(onboarded: Path) -> None:
    """Every file of every bundle, and of what the operator keeps, publishes and relays, read byte for byte."""
    keys = {name: (onboarded / name / f"{name}.key").read_bytes().strip() for name in PARTIES}
    secrets = {
        f"column-block-{j}": _secret(onboarded / f"r0c{j}", f"column-block-{j}.secret").strip() for j in range(3)
    }
    secrets["record-ids"] = _secret(onboarded / "r0c0", "record-ids.key").strip()
    members = {f"column-block-{j}": {e.id for e in ENTITIES if e.column_block == j} for j in range(3)}
    members["record-ids"] = {e.id for e in ENTITIES}
    holders = {**{name: {name} for name in PARTIES}, "operator": set(), "published": set(), "relay": set()}
    for holder, names in holders.items():
        for path in (onboarded / holder).iterdir():
            content = path.read_bytes()
            for owner, key in keys.items():
                assert owner in names or key not in content, f"{path} holds {owner}'s private key"
            for group, secret in secrets.items():
                assert names & members[group] or secret not in content, f"{path} holds the secret of {group}"


def test_private_files_are_private_and_share_material_is_gone(onboarded: Path) -> None:
    for entity in ENTITIES:
        bundle = onboarded / entity.id
        for filename in (
            f"{entity.id}.key",
            f"column-block-{entity.column_block}.secret",
            "record-ids.key",
            f"{entity.id}.toml",
        ):
            assert stat.S_IMODE((bundle / filename).stat().st_mode) == 0o600, filename
        assert not (bundle / onboarding.SHARE_KEY_FILE).exists()
        assert not (bundle / onboarding.OWN_SHARES_FILE).exists()


def test_entity_bundle_is_a_working_config(onboarded: Path) -> None:
    config = load_entity_config(onboarded / "r1c2" / "r1c2.toml")
    assert config.id == "r1c2" and config.column_block == 2
    assert config.column_block_members == ("r0c2", "r1c2")
    assert config.read_secret() == bytes.fromhex(_secret(onboarded / "r0c2", "column-block-2.secret").decode())
    assert config.tls is not None and config.coordinator_identity == "coordinator"
    assert config.listen == "0.0.0.0:50051"
    assert "r1c2.toml" in (onboarded / "r1c2" / "compose.yml").read_text(encoding="utf-8")
    assert (onboarded / "coordinator" / "federation.toml").is_file()


def test_the_operator_decides_the_roles(onboarded: Path) -> None:
    roles = {name: certificate_party((onboarded / name / f"{name}.pem").read_bytes()).roles for name in PARTIES}
    assert roles["r0c0"] == {"entity"}
    assert roles["coordinator"] == {"coordinator", "client"}
    assert roles["client"] == {"client"}
    ca = x509.load_pem_x509_certificate((onboarded / "published" / "ca.pem").read_bytes())
    for name in PARTIES:
        cert = x509.load_pem_x509_certificate((onboarded / name / f"{name}.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        key = (onboarded / name / f"{name}.key").read_bytes()
        assert (
            cert.public_key()
            == x509.load_pem_x509_csr(
                json.loads((onboarded / name / f"{name}.request.json").read_text())["csr"].encode()
            ).public_key()
        )
        assert b"PRIVATE KEY" in key


def test_a_substituted_share_key_is_caught(tmp_path: Path) -> None:
    """An operator that publishes its own key for a member: that member refuses to seal; the others'
    shares to it would not open with the member's key; and the members' fingerprints differ."""
    root = _onboard(tmp_path, join=False)
    enrolment_path = root / "published" / onboarding.ENROLMENT_FILE
    honest = json.loads(enrolment_path.read_text())
    before = onboarding.fingerprints(onboarding._Published(root / "published"))
    forged = shares.ShareKey.new()
    honest["share_keys"]["r1c0"] = forged.public.hex()
    enrolment_path.write_text(json.dumps(honest))
    after = onboarding.fingerprints(onboarding._Published(root / "published"))
    assert before["column-block-0"] != after["column-block-0"] and before["column-block-1"] == after["column-block-1"]
    with pytest.raises(ConfigError, match="not this bundle's"):
        onboarding.seal_shares(root / "r1c0", root / "published", root / "relay-2")
    onboarding.seal_shares(root / "r0c0", root / "published", root / "relay-2")
    sealed = (root / "relay-2" / "column-block-0.r0c0-to-r1c0.sealed").read_text()
    with pytest.raises(ConfigError, match="does not open"):
        shares.open_sealed(sealed, bytes.fromhex((root / "r1c0" / "share.key").read_text()), origin="relayed")
    # What the forger can open, it can read: the reason members compare fingerprints out of band.
    assert shares.open_sealed(sealed, forged.private, origin="relayed")[1] is not None


def test_a_data_file_outside_the_bundle_is_mounted_where_the_config_names_it(tmp_path: Path) -> None:
    """Issue 30 item 2: `org join --data /host/path` gives a container config and compose file that agree."""
    root = _onboard(tmp_path, join=False)
    host = tmp_path / "hospital-share" / "patients.csv"
    onboarding.join(root / "r0c0", root / "published", root / "relay", data=str(host),
                    extra_tables=[("[data]", {"source": "sql", "url_env": "HOSPITAL_DB", "table": "t"})])  # fmt: skip
    config = (root / "r0c0" / "r0c0.toml").read_text(encoding="utf-8")
    assert 'data = "/data/patients.csv"' in config
    service = yaml.safe_load((root / "r0c0" / "compose.yml").read_text(encoding="utf-8"))["services"]["r0c0"]
    assert service["volumes"] == ["./:/ppsvm", f"{host.parent}:/data:ro"]
    port = next(e.address for e in ENTITIES if e.id == "r0c0").rsplit(":", 1)[1]
    assert service["environment"] == ["HOSPITAL_DB"] and service["ports"] == [f"{port}:{port}"]
    onboarding.join(root / "coordinator", root / "published", None)
    coordinator = (root / "coordinator" / "compose.yml").read_text(encoding="utf-8")
    assert all(e.address in coordinator for e in ENTITIES) and "docker build -t ppsvm:local" in coordinator


def test_a_missing_share_is_named(tmp_path: Path) -> None:
    root = _onboard(tmp_path, join=False)
    (root / "relay" / "column-block-0.r1c0-to-r0c0.sealed").unlink()
    with pytest.raises(ConfigError, match="column-block-0: no share yet from r1c0"):
        onboarding.join(root / "r0c0", root / "published", root / "relay", data="cell.csv")
    assert not (root / "r0c0" / "column-block-0.secret").exists()


def test_an_altered_sealed_share_does_not_open(tmp_path: Path) -> None:
    root = _onboard(tmp_path, join=False)
    path = root / "relay" / "column-block-0.r1c0-to-r0c0.sealed"
    document = json.loads(path.read_text())
    document["group"] = "column-block-1"  # passed off as another group's share
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="does not open"):
        onboarding.join(root / "r0c0", root / "published", root / "relay", data="cell.csv")


def test_publish_refuses_missing_extra_and_altered_requests(tmp_path: Path) -> None:
    requests = [onboarding.init_party(tmp_path / name, name, role) for name, role in PARTIES.items()]  # type: ignore[arg-type]
    onboarding.init_operator(tmp_path / "operator", 30)
    plan = tmp_path / "plan.toml"
    plan.write_text(federation_toml({"task": "classify"}, ENTITIES), encoding="utf-8")

    def publish(paths: list[Path]) -> None:
        onboarding.publish(
            tmp_path / "operator",
            plan,
            paths,
            tmp_path / "out",
            coordinator="coordinator",
            clients=["client"],
            valid_days=30,
        )

    with pytest.raises(ConfigError, match="no request from r0c1"):
        publish([p for p in requests if "r0c1" not in p.name])
    stranger = onboarding.init_party(tmp_path / "stranger", "stranger", "client")
    with pytest.raises(ConfigError, match=r"parties the plan does not name: stranger \(prediction clients are named "
                       r"with --client: add --client stranger\)"):  # fmt: skip
        publish([*requests, stranger])
    document = json.loads(requests[0].read_text())
    document["csr"] = document["csr"].replace(document["csr"].splitlines()[3], document["csr"].splitlines()[4])
    requests[0].write_text(json.dumps(document))
    with pytest.raises(ConfigError):
        publish(requests)
    assert not (tmp_path / "out").exists()


def test_init_never_replaces_a_party_s_keys(tmp_path: Path) -> None:
    onboarding.init_party(tmp_path / "r0c0", "r0c0", "entity")
    key = (tmp_path / "r0c0" / "r0c0.key").read_bytes()
    with pytest.raises(ConfigError, match="already holds"):
        onboarding.init_party(tmp_path / "r0c0", "r0c0", "entity")
    assert (tmp_path / "r0c0" / "r0c0.key").read_bytes() == key


def test_group_secret_depends_on_every_share_and_on_the_group() -> None:
    a, b = shares.new_share(), shares.new_share()
    base = shares.group_secret("column-block-0", {"r0c0": a, "r1c0": b})
    assert base == shares.group_secret("column-block-0", {"r1c0": b, "r0c0": a})
    assert base != shares.group_secret("column-block-1", {"r0c0": a, "r1c0": b})
    assert base != shares.group_secret("column-block-0", {"r0c0": a, "r1c0": shares.new_share()})
    assert len(base) == shares.SECRET_BYTES
