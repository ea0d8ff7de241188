"""swapjit: Python bindings (ctypes, standard library only) over the C API in include/swapjit/swapjit_c.h.

Pointers are raw device addresses (ints) or, when torch is importable, torch tensors (their data_ptr()).
The stream defaults to torch's current stream when torch is importable, else the legacy default stream.

    import swapjit
    svc = swapjit.Service(cache_dirs="/tmp/swapjit-cache")
    layer = swapjit.Layer(svc, live_heads=16, window=128, topk=512)
    svc.warmup()                      # before CUDA graph capture
    layer.forward(num_tokens=..., q=q, positions=pos, ...)
"""
import ctypes
import os
from pathlib import Path

__all__ = ["SwapjitError", "Service", "Layer", "has_driver", "version", "library_path",
           "FORMAT_V41_FP8", "FORMAT_V41_FP4", "FORMAT_V4_FP8", "Q_PLAIN", "Q_CHUNK16",
           "OUT_MXFP8_OFUSED", "OUT_BF16", "CHOICE_AUTO", "CHOICE_SWAPAB", "CHOICE_HEADPAD"]

FORMAT_NONE, FORMAT_V41_FP8, FORMAT_V41_FP4, FORMAT_V4_FP8 = 0, 1, 2, 3
Q_PLAIN, Q_CHUNK16 = 1, 2
OUT_MXFP8_OFUSED, OUT_BF16 = 1, 2
CHOICE_AUTO, CHOICE_SWAPAB, CHOICE_HEADPAD = 0, 1, 2
_STATUS_NAMES = ["ok", "invalid_argument", "not_found", "compile_failed", "cache_io", "no_driver",
                 "driver_error", "not_warmed", "unsupported", "internal"]


class SwapjitError(RuntimeError):
    """A failed swapjit call: .status is the C status code, .code its name (e.g. "no_driver")."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.code = _STATUS_NAMES[status] if 0 <= status < len(_STATUS_NAMES) else "unknown"


class _CacheRef(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("page_stride", ctypes.c_int64), ("pages", ctypes.c_int32)]


class _ServiceOptions(ctypes.Structure):
    _fields_ = [("cache_dirs", ctypes.c_char_p), ("jobs", ctypes.c_int), ("device", ctypes.c_int),
                ("arch", ctypes.c_char_p), ("swapab_max_tokens", ctypes.c_int),
                ("swapab_split_max_tokens", ctypes.c_int), ("swapab_split4_max_tokens", ctypes.c_int),
                ("headpad_split_max_tokens", ctypes.c_int), ("headpad_split4_max_tokens", ctypes.c_int)]


class _LayerConfig(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("live_heads", "window", "topk", "swa_format", "comp_format",
                                            "swa_page", "comp_page", "q_layout", "out_layout",
                                            "batch_invariant")]


_P, _I32, _I64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64


class _DecodeStep(ctypes.Structure):
    _fields_ = [("num_tokens", _I32), ("q", _P), ("q_token_stride", _I64), ("q_h_pad", _I32),
                ("positions", _P), ("cos_sin", _P), ("max_pos", _I32), ("swa_slots", _P), ("swa_lens", _P),
                ("swa_width", _I32), ("comp_slots", _P), ("comp_lens", _P), ("comp_width", _I32),
                ("sink", _P), ("sm_scale", ctypes.c_float), ("swa_cache", _CacheRef), ("comp_cache", _CacheRef),
                ("out_data", _P), ("out_scale", _P), ("n_groups_alloc", _I32), ("n_total", _I32),
                ("out_bf16", _P), ("out_token_stride", _I64)]


class _InsertStep(ctypes.Structure):
    _fields_ = [("num_rows", _I32), ("rows", _P), ("row_stride", _I64), ("slots", _P), ("positions", _P),
                ("cos_sin", _P), ("max_pos", _I32), ("cache", _CacheRef)]


def library_path():
    """Where libswapjit.so is looked for: $SWAPJIT_LIBRARY, next to this package, the repo's build*/lib."""
    env = os.environ.get("SWAPJIT_LIBRARY")
    if env:
        return env
    here = Path(__file__).resolve().parent
    # In the package; beside it; <prefix>/lib when installed as <prefix>/lib/python/swapjit (install.cmake).
    candidates = [here / "libswapjit.so", here.parent / "libswapjit.so", here.parent.parent / "libswapjit.so"]
    repo = here.parent.parent
    candidates += sorted(repo.glob("build*/lib/libswapjit.so"))
    for c in candidates:
        if c.exists():
            return str(c)
    return "libswapjit.so"  # the dynamic loader's search path


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(library_path())
    st = ctypes.c_int
    sigs = {
        "swapjit_version": (ctypes.c_char_p, []),
        "swapjit_has_driver": (ctypes.c_int, []),
        "swapjit_last_error": (ctypes.c_char_p, []),
        "swapjit_service_options_init": (None, [ctypes.POINTER(_ServiceOptions)]),
        "swapjit_layer_config_init": (None, [ctypes.POINTER(_LayerConfig)]),
        "swapjit_decode_step_init": (None, [ctypes.POINTER(_DecodeStep)]),
        "swapjit_insert_step_init": (None, [ctypes.POINTER(_InsertStep)]),
        "swapjit_service_create": (st, [ctypes.POINTER(_ServiceOptions), ctypes.POINTER(ctypes.c_void_p)]),
        "swapjit_service_destroy": (None, [ctypes.c_void_p]),
        "swapjit_service_warmup": (st, [ctypes.c_void_p]),
        "swapjit_service_seal": (st, [ctypes.c_void_p]),
        "swapjit_service_arch": (st, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]),
        "swapjit_layer_create": (st, [ctypes.c_void_p, ctypes.POINTER(_LayerConfig), ctypes.POINTER(ctypes.c_void_p)]),
        "swapjit_layer_destroy": (None, [ctypes.c_void_p]),
        "swapjit_layer_keys_json": (st, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
        "swapjit_layer_launch_key_json": (st, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                               ctypes.POINTER(ctypes.c_int)]),
        "swapjit_layer_choose": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
        "swapjit_forward": (st, [ctypes.c_void_p, ctypes.POINTER(_DecodeStep), ctypes.c_void_p, ctypes.c_int]),
        "swapjit_insert": (st, [ctypes.c_void_p, ctypes.POINTER(_InsertStep), ctypes.c_int, ctypes.c_void_p]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _check(status):
    if status != 0:
        raise SwapjitError(status, _load().swapjit_last_error().decode(errors="replace"))


def _torch():
    try:
        import torch  # noqa: PLC0415 (optional dependency)
        return torch
    except ImportError:
        return None


def _ptr(x, what="pointer"):
    """A device address from an int, None, or anything with data_ptr() (a torch tensor). A tensor in host
    memory is refused: its address would reach a kernel as a device pointer (an illegal address that
    kills the CUDA context)."""
    if x is None:
        return None
    if hasattr(x, "data_ptr"):
        if getattr(x, "is_cuda", True) is False:
            raise SwapjitError(1, f"swapjit invalid_argument: {what} is a tensor on {getattr(x, 'device', 'the host')}: "
                                  "swapjit needs device memory")
        return x.data_ptr() or None
    return int(x) or None


def _stream(stream):
    if stream is not None:
        return _ptr(getattr(stream, "cuda_stream", stream))
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_stream().cuda_stream or None
    return None


def _cache(c):
    """A cache as (base, page_stride, pages) or a dict with those keys."""
    if c is None:
        return _CacheRef()
    if isinstance(c, dict):
        return _CacheRef(_ptr(c["base"], "cache base"), int(c["page_stride"]), int(c["pages"]))
    base, stride, pages = c
    return _CacheRef(_ptr(base, "cache base"), int(stride), int(pages))


def version():
    return _load().swapjit_version().decode()


def has_driver():
    return bool(_load().swapjit_has_driver())


class Service:
    """One per process: compiles (NVRTC, disk cache), loads and seals the keys of its layers."""

    # swapab_split_max_tokens / swapab_split4_max_tokens: steps of at most that many tokens split each token's
    # heads over two / four clusters (0: the measured default, -1: never). headpad_split_max_tokens /
    # headpad_split4_max_tokens: the same for the head-padded kernel on layers of 64 or more heads (both 0: the
    # measured table; otherwise caps, 0 or -1: never).
    def __init__(self, cache_dirs=None, jobs=0, device=0, arch=None, swapab_max_tokens=0, swapab_split_max_tokens=0,
                 swapab_split4_max_tokens=0, headpad_split_max_tokens=0, headpad_split4_max_tokens=0):
        lib = _load()
        o = _ServiceOptions()
        lib.swapjit_service_options_init(ctypes.byref(o))
        # os.fsencode: a pathlib.Path (or a str with any file-system characters) works as cache_dirs.
        self._keep = [os.fsencode(os.fspath(s)) if s else None for s in (cache_dirs, arch)]
        o.cache_dirs, o.arch = self._keep
        o.jobs, o.device, o.swapab_max_tokens = jobs, device, swapab_max_tokens
        o.swapab_split_max_tokens, o.swapab_split4_max_tokens = swapab_split_max_tokens, swapab_split4_max_tokens
        o.headpad_split_max_tokens, o.headpad_split4_max_tokens = headpad_split_max_tokens, headpad_split4_max_tokens
        h = ctypes.c_void_p()
        _check(lib.swapjit_service_create(ctypes.byref(o), ctypes.byref(h)))
        self._h = h
        self._layers = []

    @property
    def arch(self):
        buf = ctypes.create_string_buffer(64)
        _check(_load().swapjit_service_arch(self._h, buf, 64))
        return buf.value.decode()

    def warmup(self):
        _check(_load().swapjit_service_warmup(self._h))

    def seal(self):
        _check(_load().swapjit_service_seal(self._h))

    def close(self):
        if getattr(self, "_h", None):
            for layer in self._layers:
                layer.close()
            _load().swapjit_service_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()


class Layer:
    """One attention layer kind; registers its keys with the service at construction."""

    def __init__(self, service, live_heads=16, window=128, topk=512, swa_format=FORMAT_V4_FP8,
                 comp_format=FORMAT_V4_FP8, swa_page=64, comp_page=64, q_layout=Q_CHUNK16,
                 out_layout=OUT_MXFP8_OFUSED, batch_invariant=False):
        lib = _load()
        c = _LayerConfig(live_heads, window, topk, swa_format, comp_format, swa_page, comp_page, q_layout,
                         out_layout, int(bool(batch_invariant)))
        h = ctypes.c_void_p()
        _check(lib.swapjit_layer_create(service._h, ctypes.byref(c), ctypes.byref(h)))
        self._h = h
        self._service = service  # the service must outlive its layers (C API REQUIRES)
        service._layers.append(self)

    def _json(self, fn, *args):
        import json
        needed = ctypes.c_int(0)
        _check(fn(self._h, *args, None, 0, ctypes.byref(needed)))
        buf = ctypes.create_string_buffer(needed.value)
        _check(fn(self._h, *args, buf, needed.value, None))
        return json.loads(buf.value.decode())

    def keys(self):
        """The layer's compile keys (canonical JSON objects, parsed)."""
        return self._json(_load().swapjit_layer_keys_json)

    def launch_key(self, num_tokens, swa_width):
        """The key forward(choice=CHOICE_AUTO) launches for a step of this shape (parsed canonical JSON)."""
        return self._json(_load().swapjit_layer_launch_key_json, num_tokens, swa_width)

    def choose(self, num_tokens, swa_width):
        return _load().swapjit_layer_choose(self._h, num_tokens, swa_width)

    def forward(self, num_tokens, q, positions, cos_sin, max_pos, swa_slots, swa_lens, swa_width, swa_cache,
                q_token_stride=0, q_h_pad=64, comp_slots=None, comp_lens=None, comp_width=0, comp_cache=None,
                sink=None, sm_scale=512 ** -0.5, out_data=None, out_scale=None, n_groups_alloc=0, n_total=0,
                out_bf16=None, out_token_stride=0, stream=None, choice=CHOICE_AUTO):
        s = _DecodeStep()
        _load().swapjit_decode_step_init(ctypes.byref(s))
        s.num_tokens, s.q, s.q_token_stride, s.q_h_pad = num_tokens, _ptr(q, "q"), q_token_stride, q_h_pad
        s.positions, s.cos_sin, s.max_pos = _ptr(positions, "positions"), _ptr(cos_sin, "cos_sin"), max_pos
        s.swa_slots, s.swa_lens, s.swa_width = _ptr(swa_slots, "swa_slots"), _ptr(swa_lens, "swa_lens"), swa_width
        s.comp_slots, s.comp_lens = _ptr(comp_slots, "comp_slots"), _ptr(comp_lens, "comp_lens")
        s.comp_width = comp_width
        s.sink, s.sm_scale = _ptr(sink, "sink"), sm_scale
        s.swa_cache, s.comp_cache = _cache(swa_cache), _cache(comp_cache)
        s.out_data, s.out_scale = _ptr(out_data, "out_data"), _ptr(out_scale, "out_scale")
        s.n_groups_alloc, s.n_total = n_groups_alloc, n_total
        s.out_bf16, s.out_token_stride = _ptr(out_bf16, "out_bf16"), out_token_stride
        _check(_load().swapjit_forward(self._h, ctypes.byref(s), _stream(stream), choice))

    def insert(self, num_rows, rows, slots, cache, swa=True, row_stride=512, positions=None, cos_sin=None,
               max_pos=0, stream=None):
        s = _InsertStep()
        _load().swapjit_insert_step_init(ctypes.byref(s))
        s.num_rows, s.rows, s.row_stride, s.slots = num_rows, _ptr(rows, "rows"), row_stride, _ptr(slots, "slots")
        s.positions, s.cos_sin = _ptr(positions, "positions"), _ptr(cos_sin, "cos_sin")
        s.max_pos, s.cache = max_pos, _cache(cache)
        _check(_load().swapjit_insert(self._h, ctypes.byref(s), int(bool(swa)), _stream(stream)))

    def close(self):
        if getattr(self, "_h", None):
            _load().swapjit_layer_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()
