/* The module episodes._speedups, and bind(), which measures the slot offsets step.c reads. */
#include "speedups.h"

State S;
PyObject *one;
PyObject *str_dtype, *str_shape, *str_tobytes, *str_flush, *str_infos, *str_terminated,
    *str_truncated, *str_extra_model_outputs;

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL) {
        return -1;
    }
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        Py_DECREF(descr);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a writable object slot", type->tp_name, name);
        Py_DECREF(descr);
        return -1;
    }
    *offset = member->offset;
    Py_DECREF(descr);
    return 0;
}

static PyObject *
bind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"episode_type", "buffer_type", "columns_type", "slow", "clock",
                            "integers",     "max_pending", "doc",          NULL};
    PyTypeObject *episode_type, *buffer_type, *columns_type;
    PyObject *slow, *clock, *integers;
    Py_ssize_t max_pending;
    const char *doc;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!OOO!ns:bind", names, &PyType_Type,
                                     &episode_type, &PyType_Type, &buffer_type, &PyType_Type,
                                     &columns_type, &slow, &clock, &PyFrozenSet_Type, &integers,
                                     &max_pending, &doc)) {
        return NULL;
    }
    /* Measured into a copy: a failed bind (or a reloaded module binding its new class)
     * leaves the current binding working until everything is known. */
    State next = S;
    struct {
        PyTypeObject *type;
        const char *name;
        Py_ssize_t *offset;
    } slots[] = {
        {episode_type, "observations", &next.ep_obs},
        {episode_type, "infos", &next.ep_infos},
        {episode_type, "actions", &next.ep_act},
        {episode_type, "rewards", &next.ep_rew},
        {episode_type, "extra_model_outputs", &next.ep_emo},
        {episode_type, "is_terminated", &next.ep_term},
        {episode_type, "is_truncated", &next.ep_trunc},
        {episode_type, "t", &next.ep_t},
        {episode_type, "_obs_check", &next.ep_obs_check},
        {episode_type, "_action_check", &next.ep_act_check},
        {episode_type, "_start_time", &next.ep_start},
        {episode_type, "_last_step_time", &next.ep_last},
        {buffer_type, "_items", &next.buf_items},
        {buffer_type, "_columns", &next.buf_columns},
        {columns_type, "_kind", &next.col_kind},
        {columns_type, "_pending", &next.col_pending},
        {columns_type, "size", &next.col_size},
        {columns_type, "_always_fit", &next.col_always_fit},
        {columns_type, "_int_low", &next.col_int_low},
        {columns_type, "_int_high", &next.col_int_high},
        {columns_type, "_row_dtype", &next.col_row_dtype},
        {columns_type, "_row_shape", &next.col_row_shape},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        if (slot_offset(slots[i].type, slots[i].name, slots[i].offset) < 0) {
            return NULL;
        }
    }
    /* Every descriptor made here shares the one method definition and reads its docstring
     * from it, so the text is replaced, never freed while in use. */
    char *doc_copy = PyMem_RawMalloc(strlen(doc) + 1);
    if (doc_copy == NULL) {
        return PyErr_NoMemory();
    }
    strcpy(doc_copy, doc);
    PyObject *method = PyDescr_NewMethod(episode_type, &episodes_add_env_step_def);
    if (method == NULL) {
        PyMem_RawFree(doc_copy);
        return NULL;
    }
    char *old_doc = (char *)episodes_add_env_step_def.ml_doc;
    episodes_add_env_step_def.ml_doc = doc_copy;
    PyMem_RawFree(old_doc);
    Py_INCREF(episode_type);
    Py_INCREF(buffer_type);
    Py_INCREF(columns_type);
    Py_INCREF(slow);
    Py_INCREF(clock);
    Py_INCREF(integers);
    State old = S;
    S = next;
    S.episode_type = episode_type;
    S.buffer_type = buffer_type;
    S.columns_type = columns_type;
    S.slow = slow;
    S.clock = clock;
    S.integers = integers;
    S.max_pending = max_pending;
    S.bound = 1;
    Py_XDECREF(old.episode_type);
    Py_XDECREF(old.buffer_type);
    Py_XDECREF(old.columns_type);
    Py_XDECREF(old.slow);
    Py_XDECREF(old.clock);
    Py_XDECREF(old.integers);
    return method;
}


static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_VARARGS | METH_KEYWORDS,
     "bind(...) -> method descriptor: the C add_env_step for the given episode class."},
    {"join_rows", (PyCFunction)(void (*)(void))episodes_join_rows, METH_FASTCALL,
     "join_rows(items, out) -> bool: copy equal rows into out, False if they do not match."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups", "Optional C fast paths of episodes.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&episodes_BoxCheckType) < 0) {
        return NULL;
    }
    one = PyLong_FromLong(1);
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL) {
        return NULL;
    }
    S.ndarray_type = (PyTypeObject *)PyObject_GetAttrString(numpy, "ndarray");
    Py_DECREF(numpy);
    if (S.ndarray_type == NULL || !PyType_Check(S.ndarray_type)) {
        return NULL;
    }
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_tobytes = PyUnicode_InternFromString("tobytes");
    str_flush = PyUnicode_InternFromString("_flush");
    str_infos = PyUnicode_InternFromString("infos");
    str_terminated = PyUnicode_InternFromString("terminated");
    str_truncated = PyUnicode_InternFromString("truncated");
    str_extra_model_outputs = PyUnicode_InternFromString("extra_model_outputs");
    if (!one || !str_dtype || !str_shape || !str_tobytes || !str_flush || !str_infos || !str_terminated ||
        !str_truncated || !str_extra_model_outputs) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "BoxCheck", (PyObject *)&episodes_BoxCheckType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
