"""Why reference weights do not load into a student's module, read as the cause."""
from __future__ import annotations

def state_mismatch(own: dict, reference: dict, sizes: dict[int, str], show_shapes: bool = True) -> list[tuple[str, str]]:
    """(key, text) for each reason the ``reference`` state dict does not load into a module whose state dict is
    ``own``: what PyTorch's load_state_dict error lists (size mismatches, missing and unexpected keys), read as the
    cause: a layer of another size and where that size comes from (``sizes``: a number -> its name), an attribute
    renamed, a layer missing or extra."""
    import re
    found = []
    seen = set()
    for name in sorted(set(own) & set(reference)):
        mine, right = tuple(own[name].shape), tuple(reference[name].shape)
        layer = re.sub(r"\.(\d+)\.", ".*.", name).rsplit(".", 1)[0]  # every layer's, and weight with bias: once
        if mine != right and layer not in seen:
            seen.add(layer)
            name = layer
            sources = [sizes.get(dim, "") for dim, other in zip(mine, right) if dim != other]
            why = "; ".join((f"{dim} is {source}" if show_shapes else f"a size is {source}") for dim, source in
                            zip([d for d, o in zip(mine, right) if d != o], sources) if source)
            shapes = f" ({mine} where the reference has {right})" if show_shapes else ""
            found.append(("model.layer_size", f"{name} has another size{shapes}" + (f": {why}" if why else "")))
    extra = sorted(set(own) - set(reference))
    missing = sorted(set(reference) - set(own))
    renamed = []
    for name in list(extra):
        leaf = name.rsplit(".", 1)[-1]
        match = next((other for other in missing if other.rsplit(".", 1)[-1] == leaf
                      and tuple(reference[other].shape) == tuple(own[name].shape)
                      and other.count(".") == name.count(".")), None)
        if match is not None:
            missing.remove(match)
            extra.remove(name)
            renamed.append((name, match))
    for mine, right in renamed[:4]:
        found.append(("model.renamed", f"your {mine.rsplit('.', 1)[0]} is named {right.rsplit('.', 1)[0]} in the skeleton "
                                       "(the reference weights carry the skeleton's names)"))
    for name in missing[:4]:
        found.append(("model.missing_layer", f"your module has no {name}, which the reference has"))
    for name in extra[:4]:
        found.append(("model.extra_layer", f"your module has {name}, which the reference does not: a layer too many"))
    return found
