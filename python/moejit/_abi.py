"""The C ABI of include/moejit.h as ctypes: every struct, enum and prototype lives here only.

tests/test_abi.py compiles a C program against the header and checks each struct's size and
field offsets, so a change to the header that this file does not follow fails the tests.
"""
import ctypes
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint64, c_void_p)

# moejit_status (numbers are never reused).
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_UNSUPPORTED = 2
ERR_OUT_OF_MEMORY = 3
ERR_COMPILE = 4
ERR_NO_DRIVER = 5
ERR_NO_DEVICE = 6
ERR_CUDA = 7
ERR_IO = 8
ERR_CACHE_MISS = 9
ERR_INTERNAL = 10
ERR_BUFFER_TOO_SMALL = 11
ERR_NOT_WARMED = 12

# moejit_act_kind: the integer ABI shared with the CUTLASS / TensorRT-LLM MoE kernels.
ACT_GELU = 0
ACT_RELU = 1
ACT_SILU = 2
ACT_SWIGLU = 3
ACT_GEGLU = 4
ACT_RELU2 = 6
ACT_SWIGLU_STEP = 7
ACT_GEGLU_TANH = 8
ACT_IDENTITY = 9
ACT_SITU = 10


class moejit_options(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("cache_dir", c_char_p),
        ("cache_mode", c_char_p),
        ("cache_max_bytes", c_int64),
        ("compile_timeout_s", c_double),
        ("device", c_int),
        ("allow_unvalidated", c_int64),
        ("compile_worker", c_char_p),
        ("compile_only", c_int64),
    ]


class moejit_kernel_resources(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("registers", c_int),
        ("shared_bytes", c_int),
        ("stack_bytes", c_int),
        ("spill_store_bytes", c_int),
        ("spill_load_bytes", c_int),
    ]


class moejit_moe_args(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("num_tokens", c_int64),
        ("hidden", c_int64),
        ("inter", c_int64),
        ("num_experts", c_int64),
        ("topk", c_int64),
        ("expert_offset", c_int64),
        ("num_local_experts", c_int64),
        ("x", c_void_p),
        ("router_logits", c_void_p),
        ("topk_ids", c_void_p),
        ("topk_weights", c_void_p),
        ("routing_bias", c_void_p),
        ("w1", c_void_p),
        ("w2", c_void_p),
        ("b1", c_void_p),
        ("b2", c_void_p),
        ("w1_scale", c_void_p),
        ("w2_scale", c_void_p),
        ("w1_zero", c_void_p),
        ("w2_zero", c_void_p),
        ("act_param", c_void_p * 3),
        ("out", c_void_p),
        ("x_scale", c_void_p),
    ]


class moejit_warm_result(Structure):
    _fields_ = [
        ("index", c_size_t),
        ("spec", c_void_p),
        ("status", c_int),
        ("message", c_char_p),
        ("compiled", c_int),
        ("seconds", c_double),
        ("done", c_size_t),
        ("total", c_size_t),
        ("failed_dir", c_char_p),
    ]


# void (*moejit_warm_progress_fn)(void *user, const moejit_warm_result *result)
warm_progress_fn = ctypes.CFUNCTYPE(None, c_void_p, POINTER(moejit_warm_result))

# The header's struct names, for the layout test.
STRUCTS = {
    "moejit_options": moejit_options,
    "moejit_kernel_resources": moejit_kernel_resources,
    "moejit_moe_args": moejit_moe_args,
    "moejit_warm_result": moejit_warm_result,
}

# Opaque handles are plain pointers.
activation_p = c_void_p
spec_p = c_void_p
context_p = c_void_p
kernel_p = c_void_p

# name: (restype, argtypes); a name missing from the library is left out (optional API).
PROTOTYPES = {
    "moejit_last_error": (c_char_p, []),
    "moejit_status_name": (c_char_p, [c_int]),
    "moejit_activation_create": (c_int, [c_int, POINTER(activation_p)]),
    "moejit_activation_swiglu": (c_int, [c_float, c_float, c_float, POINTER(activation_p)]),
    "moejit_activation_swiglu_step": (c_int, [c_float, POINTER(activation_p)]),
    "moejit_activation_situ": (c_int, [c_float, POINTER(c_float), POINTER(c_float),
                                       POINTER(activation_p)]),
    "moejit_activation_parse": (c_int, [c_char_p, POINTER(activation_p)]),
    "moejit_activation_destroy": (None, [activation_p]),
    "moejit_activation_kind": (c_int, [activation_p]),
    "moejit_activation_is_gated": (c_int, [activation_p]),
    "moejit_activation_param": (c_int, [activation_p, c_char_p, POINTER(c_float),
                                        POINTER(c_int)]),
    "moejit_activation_equal": (c_int, [activation_p, activation_p]),
    "moejit_activation_hash": (c_uint64, [activation_p]),
    "moejit_activation_to_string": (c_int, [activation_p, c_char_p, c_size_t,
                                            POINTER(c_size_t)]),
    "moejit_spec_parse": (c_int, [c_char_p, POINTER(spec_p)]),
    "moejit_spec_from_json": (c_int, [c_char_p, POINTER(spec_p)]),
    "moejit_spec_destroy": (None, [spec_p]),
    "moejit_spec_canonical": (c_char_p, [spec_p]),
    "moejit_spec_to_json": (c_int, [spec_p, c_char_p, c_size_t, POINTER(c_size_t)]),
    "moejit_spec_activation": (activation_p, [spec_p]),
    "moejit_spec_equal": (c_int, [spec_p, spec_p]),
    "moejit_check_support": (c_int, [spec_p]),
    "moejit_options_init": (None, [POINTER(moejit_options)]),
    "moejit_moe_args_init": (None, [POINTER(moejit_moe_args)]),
    "moejit_context_create": (c_int, [POINTER(moejit_options), POINTER(context_p)]),
    "moejit_context_destroy": (None, [context_p]),
    "moejit_kernel_get": (c_int, [context_p, spec_p, POINTER(kernel_p)]),
    "moejit_kernel_spec": (spec_p, [kernel_p]),
    "moejit_kernel_key": (c_char_p, [kernel_p]),
    "moejit_kernel_compile_seconds": (c_double, [kernel_p]),
    "moejit_kernel_is_loaded": (c_int, [kernel_p]),
    "moejit_kernel_count": (c_int, [kernel_p]),
    "moejit_kernel_resources_get": (c_int, [kernel_p, c_int, POINTER(moejit_kernel_resources)]),
    "moejit_workspace_size": (c_int, [kernel_p, POINTER(moejit_moe_args), POINTER(c_size_t)]),
    "moejit_moe_forward": (c_int, [kernel_p, POINTER(moejit_moe_args), c_void_p, c_size_t,
                                   c_void_p]),
    "moejit_warm": (c_int, [context_p, POINTER(spec_p), c_size_t, c_int, warm_progress_fn,
                            c_void_p, POINTER(c_size_t)]),
    "moejit_version": (c_char_p, []),
    "moejit_nvrtc_version": (c_int, [POINTER(c_int), POINTER(c_int)]),
    "moejit_driver_version": (c_int, [POINTER(c_int)]),
}


def bind(lib: ctypes.CDLL) -> None:
    """Sets restype/argtypes of every prototype the library exports."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.restype = restype
        fn.argtypes = argtypes
