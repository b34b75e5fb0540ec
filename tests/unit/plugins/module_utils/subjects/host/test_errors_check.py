"""subjects/host/errors_check.py: audit_error, one finding per section the facts could not read."""

from auditcase import judge


def test_fires_once_per_unreadable_section(audited):
    facts = audited("tuned_host")
    facts["errors"] = [{"section": "pci", "error": "PermissionError: [Errno 13] denied"},
                       {"section": "lxc", "error": "OSError: [Errno 5] I/O error"}]
    found = judge("audit_error", facts)
    assert [(f["subject"], f["current"], f["severity"]) for f in found] == [
        ("pci", "PermissionError: [Errno 13] denied", "medium"),
        ("lxc", "OSError: [Errno 5] I/O error", "medium")]
    assert "gpuhost.tuning.capture" in found[0]["remedy"]


def test_does_not_fire_when_every_section_was_read(audited):
    for name in ("seed_host", "tuned_host", "vm_host"):
        assert judge("audit_error", audited(name)) == [], name


def test_the_audit_column_always_applies(audited):
    # vm_host is a guest now (host_is_guest, info, in the same column): tuned_host has no
    # finding there
    assert audited("tuned_host")["checks"]["audit"]["status"] == "ok"
