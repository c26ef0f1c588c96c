import pytest

from reconciler.core.images import tags
from reconciler.core.images.tags import Node, TagError

LAB = {
    "lab-node-0": ("550", "5.15.0-119-generic", "ubuntu", "22.04", "550-5.15.0-119-generic-ubuntu22.04"),
    "lab-node-1": ("535", "5.15.0-107-generic", "ubuntu", "22.04", "535-5.15.0-107-generic-ubuntu22.04"),
    "lab-node-2": ("550", "6.8.0-45-generic", "ubuntu", "24.04", "550-6.8.0-45-generic-ubuntu24.04"),
}

NOT_A_KERNEL = "is not a release as NFD's kernel-version.full reports it"


def node(name: str = "n1", **overrides: str | None) -> Node:
    labels = {
        tags.GPU_PRESENT: "true",
        tags.DRIVER_MAJOR: "550",
        tags.KERNEL: "5.15.0-119-generic",
        tags.OS_ID: "ubuntu",
        tags.OS_VERSION_ID: "22.04",
    }
    for key, value in overrides.items():
        label = getattr(tags, key)
        if value is None:
            labels.pop(label)
        else:
            labels[label] = value
    return Node(name, labels)


@pytest.mark.parametrize("name", sorted(LAB))
def test_lab_tags(name: str) -> None:
    branch, kernel, os_id, version, expected = LAB[name]
    lab_node = node(name, DRIVER_MAJOR=branch, KERNEL=kernel, OS_ID=os_id, OS_VERSION_ID=version)
    assert tags.tag(lab_node) == expected


@pytest.mark.parametrize(
    ("os_id", "version", "expected"),
    [
        ("ubuntu", "22.04", "ubuntu22.04"),
        ("ubuntu", "24.04", "ubuntu24.04"),
        ("rhel", "9.4", "rhel9"),
        ("rocky", "8.10", "rocky8"),
        ("ol", "9", "ol9"),
        ("rhcos", "4.16", "rhcos4.16"),
        ("sles", "15.5", "sles15.5"),
    ],
)
def test_os_tag_follows_the_gpu_operator(os_id: str, version: str, expected: str) -> None:
    assert tags.os_tag(os_id, version) == expected


@pytest.mark.parametrize("label", ["DRIVER_MAJOR", "KERNEL", "OS_ID", "OS_VERSION_ID"])
def test_missing_and_empty_labels_are_different_errors(label: str) -> None:
    key = getattr(tags, label)
    with pytest.raises(TagError) as missing:
        tags.tag(node("gpu-7", **{label: None}))
    with pytest.raises(TagError) as empty:
        tags.tag(node("gpu-7", **{label: ""}))
    assert str(missing.value) == f"node gpu-7: label {key} is missing"
    assert str(empty.value) == f"node gpu-7: label {key} is empty"
    assert missing.value.reason != empty.value.reason


@pytest.mark.parametrize(
    ("label", "value", "complaint"),
    [
        ("DRIVER_MAJOR", "55a", "is not a driver branch"),
        ("DRIVER_MAJOR", "550.90", "is not a driver branch"),
        ("DRIVER_MAJOR", " 550", "is not a driver branch"),
        ("DRIVER_MAJOR", "550\n", "is not a driver branch"),
        ("KERNEL", "5.15.0 119", NOT_A_KERNEL),
        ("KERNEL", "5.15.0/119", NOT_A_KERNEL),
        ("KERNEL", "-5.15", NOT_A_KERNEL),
        ("KERNEL", "5.15.0+", NOT_A_KERNEL),
        # issue 38: what NFD's kernel-version.full never reports (tags.KERNEL_PATTERN has the sources)
        ("KERNEL", "5.15", NOT_A_KERNEL),
        ("KERNEL", "garbage", NOT_A_KERNEL),
        ("KERNEL", "550-5.15.0-119-generic-ubuntu22.04", NOT_A_KERNEL),
        ("KERNEL", "5.15.0-119-generic-", NOT_A_KERNEL),
        ("KERNEL", "5.15.0-" + "1" * 57, NOT_A_KERNEL),  # 64 characters: no label value
        ("OS_ID", "Ubuntu", "is not an os-release ID"),
        ("OS_ID", "ubuntu linux", "is not an os-release ID"),
        ("OS_VERSION_ID", "22.04 LTS", "is not an os-release VERSION_ID"),
    ],
)
def test_values_that_cannot_be_in_a_tag(label: str, value: str, complaint: str) -> None:
    with pytest.raises(TagError) as error:
        tags.tag(node("gpu-7", **{label: value}))
    assert error.value.reason.startswith(f"label {getattr(tags, label)}={value!r} {complaint}")
    assert str(error.value).startswith("node gpu-7: ")


def test_tag_longer_than_128_is_refused() -> None:
    with pytest.raises(TagError, match="not a valid image tag"):
        tags.tag(node(OS_ID="a" * 60, OS_VERSION_ID="1" * 50))
    assert tags.tag(node(OS_ID="a" * 60, OS_VERSION_ID="1" * 40))  # still fits


@pytest.mark.parametrize(
    "kernel",
    ["5.15.0-119-generic", "6.8.0", "5.14.0-427.13.1.el9_4.x86_64", "6.1.100", "5.15.0-" + "1" * 56],
)
def test_kernels_nfd_reports(kernel: str) -> None:
    assert tags.kernel_problem(kernel) is None
    assert tags.tag(node(KERNEL=kernel)) == f"550-{kernel}-ubuntu22.04"


def test_the_next_kernel_label_follows_the_same_rule() -> None:
    with pytest.raises(TagError, match=f"label {tags.NEXT_KERNEL}='6.8' {NOT_A_KERNEL}"):
        tags.next_kernel(node(NEXT_KERNEL="6.8"))
    assert tags.next_kernel(node(NEXT_KERNEL="6.8.0-45-generic")) == "6.8.0-45-generic"


def test_a_pasted_image_tag_names_its_kernel() -> None:
    problem = tags.kernel_problem("550-5.15.0-119-generic-ubuntu22.04") or ""
    assert problem.endswith("it is a whole image tag: its kernel is 5.15.0-119-generic")


@pytest.mark.parametrize(
    ("os_tag", "problem"),
    [
        ("ubuntu22.04", None),
        ("rhel9", None),
        ("rocky9.2", None),
        ("ol8", None),
        ("opensuse-leap15.5", None),
        ("amzn2023", None),
        ("ubuntu-22.04", "(ubuntu22.04?)"),
        ("22.04", "is not <ID><VERSION_ID>"),
        ("ubuntu", "is not <ID><VERSION_ID>"),
        ("ubuntu22.04-", "is not <ID><VERSION_ID>"),
        ("", "empty os tag"),
    ],
)
def test_os_tags_the_operator_makes(os_tag: str, problem: str | None) -> None:
    found = tags.os_tag_problem(os_tag)
    assert found is None if problem is None else problem in (found or "")


def test_labels_that_make_no_os_tag_are_refused() -> None:
    # Valid os-release words each, but the operator would make `ubuntujammy`: no row can name it.
    with pytest.raises(TagError, match="'ubuntujammy' is not <ID><VERSION_ID>"):
        tags.tag(node(OS_VERSION_ID="jammy"))


def test_other_labels_and_missing_gpu_label_do_not_matter_for_the_tag() -> None:
    plain = node(GPU_PRESENT=None)
    assert not plain.gpu_present
    assert tags.tag(plain) == "550-5.15.0-119-generic-ubuntu22.04"


@pytest.mark.parametrize("value", ["True", "yes", "1", ""])
def test_gpu_present_means_exactly_true(value: str) -> None:
    assert not node(GPU_PRESENT=value).gpu_present


def test_kernel_with_rhel_style_characters() -> None:
    rhel = node(KERNEL="5.14.0-427.13.1.el9_4.x86_64", OS_ID="rhel", OS_VERSION_ID="9.4")
    assert tags.tag(rhel) == "550-5.14.0-427.13.1.el9_4.x86_64-rhel9"
