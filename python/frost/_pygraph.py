"""frost.pygraph: declare tensors and ops, plan, build and execute on caller buffers."""

import numbers

from . import _buffers, _dtypes, _frost
from ._builders import OpBuilders
from ._errors import InvalidValueError, InvalidVariantPackError
from ._pointwise import PointwiseBuilders

data_type = _frost.data_type
heur_mode = _frost.heur_mode
build_plan_policy = _frost.build_plan_policy


class pygraph(PointwiseBuilders, OpBuilders):
    """A frost graph with cuDNN Frontend's Python surface.

    io_data_type applies to graph inputs and outputs that leave their type unset,
    intermediate_data_type to virtual tensors, compute_data_type to ops. The handle says where the
    graph runs (a CPU handle when no GPU is usable); execute() may name another handle on the same
    device (another stream).
    """

    def __init__(
        self,
        io_data_type=None,
        intermediate_data_type=None,
        compute_data_type=None,
        handle=None,
        name="",
        sm_count=None,
        sm_version=None,
        dynamic_shape_enabled=False,
        override_shape_enabled=False,
    ):
        self._graph = _frost.Graph()
        self._handle = handle if handle is not None else _frost.create_handle()
        self._graph.set_io_data_type(_dtypes.to_data_type(io_data_type))
        self._graph.set_intermediate_data_type(_dtypes.to_data_type(intermediate_data_type))
        self._graph.set_compute_data_type(_dtypes.to_data_type(compute_data_type))
        self._graph.set_name(name)
        self._graph.set_dynamic_shape_enabled(bool(dynamic_shape_enabled))
        self._graph.set_override_shape_enabled(bool(override_shape_enabled))
        if sm_count is not None:
            self._graph.set_sm_count(int(sm_count))
        if sm_version is not None:
            self._graph.set_sm_version(int(sm_version))
        # Pass-by-value tensors declared without a value take it from the variant pack at execute.
        self._late_scalars = []
        # execute()'s per-plan facts (_buffers.Binder), made at the first execute after a build.
        self._binder = None

    # ---- declarations ---------------------------------------------------------------------------

    def tensor(
        self,
        dim,
        stride=None,
        data_type=None,
        is_virtual=False,
        is_pass_by_value=False,
        ragged_offset=None,
        reordering_type=None,
        name="",
        uid=None,
        value=None,
    ):
        """Declares a tensor: dims, strides (packed row-major when omitted), data type (the graph's
        io type when omitted). is_pass_by_value with value= bakes a scalar into the declaration;
        without value= the scalar comes from the variant pack at execute, as in cuDNN Frontend."""
        t = _frost.tensor().set_name(name).set_dim([int(d) for d in dim])
        if stride is not None:
            t.set_stride([int(s) for s in stride])
        t.set_data_type(_dtypes.to_data_type(data_type)).set_is_virtual(bool(is_virtual))
        if ragged_offset is not None:
            t.set_ragged_offset(ragged_offset)
        if reordering_type is not None:
            t.set_reordering_type(reordering_type)
        if uid is not None:
            t.set_uid(int(uid))
        late = False
        if value is not None:
            t.set_pass_by_value(float(value))
        elif is_pass_by_value:
            # A placeholder the first execute replaces with the caller's value.
            t.set_pass_by_value(0.0)
            late = True
        t = self._graph.tensor(t)
        if late:
            self._late_scalars.append(t)
        return t

    def tensor_like(self, input, name=""):
        """A new graph input with the dims, strides and data type of a frost.tensor or of any array
        with __dlpack__ (numpy, torch, cupy, jax)."""
        if isinstance(input, _frost.tensor):
            return self._graph.tensor_like(input, name)
        described = _buffers.info(input)
        if described is None:
            raise TypeError(f"tensor_like(): {type(input).__name__} is neither a frost.tensor nor an array")
        _ptr, shape, strides, code, bits, lanes, _dev, _id = described
        dtype = _dtypes.from_dlpack(code, bits, lanes)
        if dtype is None:
            raise InvalidValueError(
                f"tensor_like(): frost has no data type for {_dtypes.dlpack_name(code, bits, lanes)}"
            )
        if not shape:
            shape, strides = (1,), (1,)
        t = _frost.tensor().set_name(name).set_dim(list(shape)).set_stride(list(strides)).set_data_type(dtype)
        return self._graph.tensor(t)

    def scalar(self, value, data_type=None):
        """A pass-by-value scalar tensor of shape [1] (FLOAT unless data_type says DOUBLE/INT32/INT64)."""
        return self._graph.scalar(float(value), _dtypes.to_data_type(data_type or _frost.data_type.FLOAT))

    def _operand(self, x, what, data_type=_frost.data_type.FLOAT):
        """x itself if it is a frost.tensor; a Python number becomes a pass-by-value scalar of data_type."""
        if isinstance(x, _frost.tensor):
            return x
        if isinstance(x, numbers.Real) and not isinstance(x, bool):
            return self._graph.scalar(float(x), data_type)
        raise TypeError(f"{what}: expected a frost.tensor or a number, got {type(x).__name__}")

    @staticmethod
    def _attributes(attrs, name, compute_data_type):
        if name:
            attrs.set_name(name)
        if compute_data_type is not None:
            attrs.set_compute_data_type(_dtypes.to_data_type(compute_data_type))
        return attrs

    # ---- lifecycle ------------------------------------------------------------------------------

    def validate(self):
        """Checks the graph, infers output dims/strides/types and assigns uids."""
        self._binder = None
        self._graph.validate()

    def build_operation_graph(self, handle=None):
        self._binder = None
        self._graph.build_operation_graph(handle or self._handle)

    def create_execution_plans(self, heur_modes=(heur_mode.A,)):
        """Ranks candidate plans for the given heuristic modes; GraphNotSupportedError if none fits."""
        self._binder = None
        if isinstance(heur_modes, heur_mode):
            heur_modes = [heur_modes]
        self._graph.create_execution_plans(list(heur_modes))

    def create_execution_plan(self, engine_id, knobs=None):
        """Adds the candidate plan of one engine with explicit knobs {frost.knob_type: value}."""
        self._binder = None
        self._graph.create_execution_plan(int(engine_id), dict(knobs or {}))

    def check_support(self, handle=None):
        self._graph.check_support(handle or self._handle)

    def build_plans(self, policy=build_plan_policy.HEURISTICS_CHOICE, handle=None):
        self._binder = None
        self._graph.build_plans(handle or self._handle, policy)

    def build_plan_at_index(self, index, handle=None):
        self._binder = None
        self._graph.build_plan_at_index(handle or self._handle, int(index))

    def build(self, heur_modes=(heur_mode.A,), policy=build_plan_policy.HEURISTICS_CHOICE, handle=None):
        """validate, build_operation_graph, create_execution_plans, check_support and build_plans."""
        self.validate()
        self.build_operation_graph(handle)
        self.create_execution_plans(heur_modes)
        self.check_support(handle)
        self.build_plans(policy, handle)

    # ---- filters and queries --------------------------------------------------------------------

    def deselect_engines(self, names):
        self._binder = None
        self._graph.deselect_engines(list(names))

    def deselect_workspace_greater_than(self, nbytes):
        self._graph.deselect_workspace_greater_than(int(nbytes))

    def select_numeric_notes(self, notes):
        self._graph.select_numeric_notes(list(notes))

    def deselect_numeric_notes(self, notes):
        self._graph.deselect_numeric_notes(list(notes))

    def select_behavior_notes(self, notes):
        self._graph.select_behavior_notes(list(notes))

    def deselect_behavior_notes(self, notes):
        self._graph.deselect_behavior_notes(list(notes))

    def get_workspace_size(self):
        """Bytes of workspace the selected plan needs."""
        return self._graph.get_workspace_size()

    def get_workspace_size_plan_at_index(self, index):
        return self._graph.get_workspace_size_plan_at_index(int(index))

    def get_execution_plan_count(self):
        return self._graph.get_execution_plan_count()

    def get_plan_name(self):
        return self._graph.get_plan_name()

    def get_plan_name_at_index(self, index):
        return self._graph.get_plan_name_at_index(int(index))

    def get_engine_and_knobs_at_index(self, index):
        """(engine_id, {frost.knob_type: value}) of candidate plan `index`."""
        return self._graph.get_engine_and_knobs_at_index(int(index))

    def get_behavior_notes(self):
        return self._graph.get_behavior_notes()

    def get_behavior_notes_for_plan_at_index(self, index):
        return self._graph.get_behavior_notes_for_plan_at_index(int(index))

    def get_numeric_notes_for_plan_at_index(self, index):
        return self._graph.get_numeric_notes_for_plan_at_index(int(index))

    def get_decline_reasons(self):
        """Each engine's reason for declining this graph, as 'engine: reason'."""
        return self._graph.get_decline_reasons()

    def get_tensors(self):
        """Every tensor declared in this graph, in creation order."""
        return self._graph.get_tensors()

    def get_tensor_by_name(self, name):
        for t in self._graph.get_tensors():
            if t.get_name() == name:
                return t
        raise KeyError(name)

    def key(self):
        """A hash of everything that identifies the graph (not names), stable across processes."""
        return self._graph.key()

    @property
    def handle(self):
        return self._handle

    # ---- execution ------------------------------------------------------------------------------

    def _pack(self, variant_pack, tensor_uids, handle):
        """uid -> pointer, after checking every buffer against its declaration (raising before any work)."""
        if isinstance(variant_pack, dict):
            if tensor_uids is not None:
                raise TypeError("execute(): tensor_uids goes with an ordered sequence of buffers, not a dict")
            entries = list(variant_pack.items())
        else:
            if tensor_uids is None:
                raise TypeError("execute(): an ordered sequence of buffers needs tensor_uids=[...]")
            buffers, tensor_uids = list(variant_pack), list(tensor_uids)
            if len(buffers) != len(tensor_uids):
                raise InvalidVariantPackError(f"execute(): {len(buffers)} buffers for {len(tensor_uids)} tensor_uids")
            entries = list(zip(tensor_uids, buffers))
        declared = {t.get_uid(): t for t in self._graph.bound_tensors() if t.has_uid()}
        given = {}
        for key, buffer in entries:
            uid = self._uid_of(key, declared)
            if uid in given:
                raise InvalidVariantPackError(f"execute(): {_buffers.describe(declared[uid])} is bound twice")
            given[uid] = buffer
        pointers, scalars = {}, []
        for uid, t in declared.items():
            if t.get_is_pass_by_value():
                if uid in given:
                    scalars.append((t, _buffers.scalar_value(t, given[uid])))
                elif any(t is s for s in self._late_scalars):
                    raise InvalidVariantPackError(
                        f"{_buffers.describe(t)}: pass-by-value tensor has no value in the pack"
                    )
                continue
            if uid not in given:
                raise InvalidVariantPackError(f"{_buffers.describe(t)} has no buffer in the variant pack")
            pointers[uid] = _buffers.pointer(t, given[uid], handle)
        for t, value in scalars:
            t.set_pass_by_value(value)
        return pointers

    @staticmethod
    def _uid_of(key, declared):
        if isinstance(key, _frost.tensor):
            if not key.has_uid():
                raise InvalidVariantPackError(
                    f"tensor '{key.get_name()}' has no uid: it is not used by this graph's ops "
                    "or validate() was not called"
                )
            uid = key.get_uid()
            if declared.get(uid) is not key:
                raise InvalidVariantPackError(
                    f"tensor '{key.get_name()}' (uid {uid}) is not a graph input or output " "of this graph"
                )
            return uid
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            if int(key) not in declared:
                raise InvalidVariantPackError(f"uid {int(key)} names no graph input or output of this graph")
            return int(key)
        raise TypeError(f"execute(): variant pack keys are frost.tensor or int uids, not {type(key).__name__}")

    def execute(self, variant_pack, workspace=None, handle=None, tensor_uids=None):
        """Runs the selected plan. variant_pack is {frost.tensor or uid: buffer}, or an ordered sequence
        of buffers with tensor_uids=[...]. Buffers are arrays with __dlpack__ (numpy, torch, cupy, jax) or
        int pointers; each is checked against its declaration first (InvalidVariantPackError, no buffer
        touched). workspace may be None when get_workspace_size() is 0. GPU work goes on the handle's
        stream (frost.set_stream); execute neither allocates nor waits for the GPU."""
        handle = handle or self._handle
        if tensor_uids is None:
            if isinstance(variant_pack, dict) and self._execute_fast(variant_pack.items(), workspace, handle):
                return
        elif isinstance(variant_pack, (list, tuple)) and isinstance(tensor_uids, (list, tuple)):
            if len(variant_pack) == len(tensor_uids) and self._execute_fast(
                zip(tensor_uids, variant_pack), workspace, handle
            ):
                return
        pointers = self._pack(variant_pack, tensor_uids, handle)
        ws = _buffers.workspace_pointer(workspace, self._graph.get_workspace_size(), handle)
        self._graph.execute(handle, pointers, ws)

    def _execute_fast(self, pairs, workspace, handle):
        """Executes when every buffer is a torch tensor laid out exactly as declared (see _buffers.Binder);
        False, having done nothing, when the checked path must look at the pack."""
        if self._late_scalars:
            return False  # their values come from the pack: the checked path reads them
        binder = self._binder
        if binder is None:
            binder = self._binder = _buffers.Binder(self._graph, self._graph.get_workspace_size())
        bound = binder.pointers(pairs, handle.device_ordinal if handle.is_cuda else -1, workspace)
        if bound is None:
            return False
        self._graph.execute_uids(handle, bound[0], bound[1], bound[2])
        return True

    def execute_plan_at_index(self, variant_pack, workspace, index, handle=None, tensor_uids=None):
        handle = handle or self._handle
        pointers = self._pack(variant_pack, tensor_uids, handle)
        ws = _buffers.workspace_pointer(workspace, self._graph.get_workspace_size_plan_at_index(int(index)), handle)
        self._graph.execute_plan_at_index(handle, pointers, ws, int(index))

    def autotune(self, variant_pack, workspace=None, handle=None, tensor_uids=None):
        """Times every built plan on these buffers and selects the fastest."""
        handle = handle or self._handle
        pointers = self._pack(variant_pack, tensor_uids, handle)
        ws = _buffers.workspace_pointer(workspace, self._graph.get_workspace_size(), handle)
        self._binder = None
        self._graph.autotune(handle, pointers, ws)

    # ---- serialization --------------------------------------------------------------------------

    def serialize(self, plan=False):
        """JSON text of the validated graph; with plan=True, bytes of the graph and its selected plan."""
        return self._graph.serialize_plan() if plan else self._graph.serialize()

    def deserialize(self, *args, handle=None):
        """deserialize(json_text) reads a graph (then validate/build as usual); deserialize(bytes) or
        deserialize(handle, bytes) restores a graph with its built plan."""
        self._binder = None
        data = args[-1] if args else None
        if len(args) == 2:
            handle = args[0]
        elif len(args) != 1:
            raise TypeError("deserialize(): expected (json_text), (data_bytes) or (handle, data_bytes)")
        if isinstance(data, str):
            self._graph.deserialize(data)
        else:
            self._graph.deserialize_plan(handle or self._handle, bytes(data))

    def __repr__(self):
        try:
            return self._graph.serialize()
        except Exception:  # noqa: BLE001 - a graph that does not validate yet has no JSON
            return f"frost.pygraph({len(self._graph.get_tensors())} tensors, not validated)"
