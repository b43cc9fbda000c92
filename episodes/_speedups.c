/* Optional C fast paths for the per-step hot spots of episodes.
 *
 * Everything here is an accelerator, never the reference: each entry point handles only the
 * common, fully checked case and hands everything else, unchanged, to the pure-Python code it
 * mirrors (which stays the definition of the behaviour and is what the tests compare against).
 *
 *   step_method(...)   add_env_step as a method of SingleAgentEpisode: list mode and numpy mode
 *                      with flat columns; anything unusual calls the Python implementation.
 *   BoxCheck           a small Box membership check reading the array's buffer directly.
 *   join_rows(items, out)
 *                      copies equal-shaped, same-format contiguous arrays into ``out``.
 *
 * The episode and buffer classes use __slots__; their member descriptors give the slot
 * offsets once, at bind time, and every fast path first checks the exact class, so an offset
 * is only ever used on an object laid out the way it was measured.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#define MAX_EXTRAS 16
#define MAX_COLUMNS (MAX_EXTRAS + 3)

/* Slot offsets and collaborators, set by bind(). */
typedef struct {
    int bound;
    PyTypeObject *episode_type, *buffer_type, *columns_type, *ndarray_type;
    Py_ssize_t ep_obs, ep_infos, ep_act, ep_rew, ep_emo, ep_term, ep_trunc, ep_t, ep_obs_check,
        ep_act_check, ep_start, ep_last;
    Py_ssize_t buf_items, buf_columns;
    Py_ssize_t col_kind, col_pending, col_size, col_always_fit, col_int_low, col_int_high,
        col_row_dtype, col_row_shape;
    PyObject *slow;         /* the pure-Python add_env_step */
    PyObject *clock;        /* time.perf_counter */
    PyObject *integers;     /* classes a scalar column range-checks instead of refusing */
    Py_ssize_t max_pending; /* flush threshold of a column's pending list */
} State;
static State S;

static PyObject *one;
static PyObject *str_dtype, *str_shape, *str_tobytes, *str_flush, *str_infos, *str_terminated,
    *str_truncated, *str_extra_model_outputs;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

static void
slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    Py_INCREF(value);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

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

/* ------------------------------------------------------------------------------ add_env_step */

/* One column write of a step, decided before anything is written. */
typedef struct {
    PyObject *list;  /* the list to append to: the buffer's items or the column's pending */
    PyObject *value; /* the item, or the bytes of a row */
    PyObject *cols;  /* numpy mode: the Columns whose size grows, else NULL */
} Write; /* every field a strong reference, so a check run in between cannot free them */

static void
writes_clear(Write *writes, int count)
{
    for (int i = 0; i < count; i++) {
        Py_CLEAR(writes[i].list);
        Py_CLEAR(writes[i].value);
        Py_CLEAR(writes[i].cols);
    }
}

/* Plans the write of ``item`` into ``buffer``: 1 planned, 0 not a fast case, -1 error. */
static int
plan_write(PyObject *buffer, PyObject *item, Write *write)
{
    if (!Py_IS_TYPE(buffer, S.buffer_type)) {
        return 0;
    }
    PyObject *items = SLOT(buffer, S.buf_items);
    if (items != NULL && PyList_CheckExact(items)) {
        write->list = Py_NewRef(items);
        write->value = Py_NewRef(item);
        write->cols = NULL;
        return 1;
    }
    PyObject *cols = SLOT(buffer, S.buf_columns);
    if (cols == NULL || !Py_IS_TYPE(cols, S.columns_type)) {
        return 0;
    }
    PyObject *kind_obj = SLOT(cols, S.col_kind), *pending = SLOT(cols, S.col_pending);
    if (kind_obj == NULL || pending == NULL || !PyLong_CheckExact(kind_obj) ||
        !PyList_CheckExact(pending)) {
        return 0;
    }
    long kind = PyLong_AsLong(kind_obj);
    if (kind == 1) { /* a flat column of numbers */
        PyObject *always_fit = SLOT(cols, S.col_always_fit);
        if (always_fit == NULL || !PyFrozenSet_CheckExact(always_fit)) {
            return 0;
        }
        int fits = PySet_Contains(always_fit, (PyObject *)Py_TYPE(item));
        if (fits < 0) {
            return -1;
        }
        if (!fits) {
            int integral = PySet_Contains(S.integers, (PyObject *)Py_TYPE(item));
            if (integral <= 0) {
                return integral;
            }
            PyObject *low = SLOT(cols, S.col_int_low), *high = SLOT(cols, S.col_int_high);
            if (low == NULL || high == NULL) {
                return 0;
            }
            int above = PyObject_RichCompareBool(low, item, Py_LE);
            if (above <= 0) {
                return above;
            }
            int below = PyObject_RichCompareBool(item, high, Py_LE);
            if (below <= 0) {
                return below;
            }
        }
        write->list = Py_NewRef(pending);
        write->value = Py_NewRef(item);
        write->cols = Py_NewRef(cols);
        return 1;
    }
    if (kind == 2 && Py_IS_TYPE(item, S.ndarray_type)) { /* a flat column of rows */
        PyObject *row_dtype = SLOT(cols, S.col_row_dtype), *row_shape = SLOT(cols, S.col_row_shape);
        if (row_dtype == NULL || row_shape == NULL) {
            return 0;
        }
        PyObject *dtype = PyObject_GetAttr(item, str_dtype);
        if (dtype == NULL) {
            return -1;
        }
        Py_DECREF(dtype); /* only its identity matters; the array keeps it alive */
        if (dtype != row_dtype) {
            return 0;
        }
        PyObject *shape = PyObject_GetAttr(item, str_shape);
        if (shape == NULL) {
            return -1;
        }
        int same = PyObject_RichCompareBool(shape, row_shape, Py_EQ);
        Py_DECREF(shape);
        if (same <= 0) {
            return same;
        }
        PyObject *bytes = PyObject_CallMethodNoArgs(item, str_tobytes);
        if (bytes == NULL) {
            return -1;
        }
        write->list = Py_NewRef(pending);
        write->value = bytes;
        write->cols = Py_NewRef(cols);
        return 1;
    }
    return 0;
}

/* Performs planned writes; on failure (memory only) takes back the ones done. */
static int
do_writes(Write *writes, int count)
{
    int done = 0;
    for (; done < count; done++) {
        Write *w = &writes[done];
        if (w->cols != NULL) {
            PyObject *size_obj = SLOT(w->cols, S.col_size);
            Py_ssize_t size = size_obj != NULL ? PyLong_AsSsize_t(size_obj) : -1;
            if (size < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_SystemError, "column without a size");
                }
                goto undo;
            }
            PyObject *bigger = PyLong_FromSsize_t(size + 1);
            if (bigger == NULL) {
                goto undo;
            }
            if (PyList_Append(w->list, w->value) < 0) {
                Py_DECREF(bigger);
                goto undo;
            }
            slot_set(w->cols, S.col_size, bigger);
            Py_DECREF(bigger);
        }
        else if (PyList_Append(w->list, w->value) < 0) {
            goto undo;
        }
    }
    return 0;
undo:
    while (done-- > 0) {
        Write *w = &writes[done];
        Py_ssize_t n = PyList_GET_SIZE(w->list);
        PyList_SetSlice(w->list, n - 1, n, NULL);
        if (w->cols != NULL) {
            PyObject *size_obj = SLOT(w->cols, S.col_size);
            PyObject *smaller = PyLong_FromSsize_t(PyLong_AsSsize_t(size_obj) - 1);
            if (smaller != NULL) {
                slot_set(w->cols, S.col_size, smaller);
                Py_DECREF(smaller);
            }
        }
    }
    return -1;
}

/* True, False, or -1 when the check is not plainly True (an error is cleared: the slow path
 * repeats the check and reports it). */
static int
passes(PyObject *check, PyObject *value)
{
    if (check == NULL || check == Py_None) {
        return 1;
    }
    PyObject *result = PyObject_CallOneArg(check, value);
    if (result == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(result);
    return result == Py_True;
}

static PyObject *
call_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[12];
    PyObject **stack = small;
    if (total + 1 > 12) {
        stack = PyMem_Malloc((total + 1) * sizeof(PyObject *));
        if (stack == NULL) {
            return PyErr_NoMemory();
        }
    }
    stack[0] = self;
    memcpy(stack + 1, args, total * sizeof(PyObject *));
    PyObject *result = PyObject_Vectorcall(S.slow, stack, nargs + 1, kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return result;
}

static int
name_is(PyObject *name, PyObject *interned)
{
    return name == interned || PyUnicode_Compare(name, interned) == 0;
}

static PyObject *
add_env_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *observation, *action, *reward, *infos = Py_None, *terminated = Py_False,
                                                   *truncated = Py_False, *extras = Py_None;
    Write writes[MAX_COLUMNS + 1];
    int count = 0, planned = 1;

    if (!S.bound || !Py_IS_TYPE(self, S.episode_type) || nargs < 3 || nargs > 4) {
        goto slow;
    }
    observation = args[0];
    action = args[1];
    reward = args[2];
    if (nargs == 4) {
        infos = args[3];
    }
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nkw; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
            if (name_is(name, str_terminated)) {
                terminated = value;
            }
            else if (name_is(name, str_truncated)) {
                truncated = value;
            }
            else if (name_is(name, str_extra_model_outputs)) {
                extras = value;
            }
            else if (nargs == 3 && name_is(name, str_infos)) {
                infos = value;
            }
            else {
                goto slow; /* positional names given as keywords, or unknown ones */
            }
        }
    }
    if (SLOT(self, S.ep_term) != Py_False || SLOT(self, S.ep_trunc) != Py_False) {
        goto slow;
    }
    /* Flags other than True/False take the Python path, which judges their truth itself. */
    if (!PyBool_Check(terminated) || !PyBool_Check(truncated)) {
        goto slow;
    }
    int finishing = terminated == Py_True || truncated == Py_True;

    PyObject *emo = SLOT(self, S.ep_emo);
    if (emo == NULL || !PyDict_CheckExact(emo)) {
        goto slow;
    }
    /* Plan every write first: observation, action, reward, extra model outputs, info. */
    PyObject *step_values[3] = {observation, action, reward};
    Py_ssize_t step_offsets[3] = {S.ep_obs, S.ep_act, S.ep_rew};
    for (int i = 0; i < 3; i++) {
        PyObject *buffer = SLOT(self, step_offsets[i]);
        if (buffer == NULL || (planned = plan_write(buffer, step_values[i], &writes[count])) <= 0) {
            goto fallback;
        }
        count++;
    }
    /* Observations, actions and rewards share a mode (mixed modes check differently). */
    int numpy_mode = writes[0].cols != NULL;
    if ((writes[1].cols != NULL) != numpy_mode || (writes[2].cols != NULL) != numpy_mode) {
        goto fallback;
    }
    if (extras == Py_None) {
        if (PyDict_GET_SIZE(emo) != 0) {
            goto fallback;
        }
    }
    else {
        /* Exactly the recorded keys. */
        if (!PyDict_CheckExact(extras) || PyDict_GET_SIZE(extras) != PyDict_GET_SIZE(emo) ||
            PyDict_GET_SIZE(extras) > MAX_EXTRAS) {
            goto fallback;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(extras, &pos, &key, &value)) {
            PyObject *column = PyDict_GetItemWithError(emo, key);
            if (column == NULL) {
                planned = PyErr_Occurred() ? -1 : 0;
                goto fallback;
            }
            if ((planned = plan_write(column, value, &writes[count])) <= 0) {
                goto fallback;
            }
            count++;
        }
    }
    PyObject *info_buffer = SLOT(self, S.ep_infos);
    if (info_buffer == NULL || !Py_IS_TYPE(info_buffer, S.buffer_type)) {
        goto fallback;
    }
    PyObject *info_items = SLOT(info_buffer, S.buf_items);
    if (info_items == NULL || !PyList_CheckExact(info_items)) {
        goto fallback;
    }
    PyObject *info = infos != Py_None ? Py_NewRef(infos) : PyDict_New();
    if (info == NULL) {
        goto error;
    }
    writes[count].list = Py_NewRef(info_items);
    writes[count].value = info;
    writes[count].cols = NULL;
    count++;

    /* The episode must be reset; a numpy'd one checks the spaces. */
    if (numpy_mode) {
        PyObject *size = SLOT(writes[0].cols, S.col_size);
        if (size == NULL || !PyLong_CheckExact(size) || PyLong_AsSsize_t(size) <= 0 ||
            !passes(SLOT(self, S.ep_obs_check), observation) ||
            !passes(SLOT(self, S.ep_act_check), action)) {
            goto fallback;
        }
    }
    else if (PyList_GET_SIZE(writes[0].list) == 0) {
        goto fallback;
    }
    PyObject *t = SLOT(self, S.ep_t);
    if (t == NULL || !PyLong_CheckExact(t)) {
        goto fallback;
    }
    /* Everything that can fail for a reason other than memory is behind us. */
    PyObject *next_t = PyNumber_Add(t, one);
    if (next_t == NULL) {
        goto error;
    }
    PyObject *now = PyObject_CallNoArgs(S.clock);
    if (now == NULL) {
        Py_DECREF(next_t);
        goto error;
    }
    if (do_writes(writes, count) < 0) {
        Py_DECREF(next_t);
        Py_DECREF(now);
        goto error;
    }
    slot_set(self, S.ep_t, next_t);
    Py_DECREF(next_t);
    if (finishing) {
        slot_set(self, S.ep_term, terminated);
        slot_set(self, S.ep_trunc, truncated);
    }
    slot_set(self, S.ep_last, now);
    PyObject *start = SLOT(self, S.ep_start);
    if (start == NULL || start == Py_None) {
        slot_set(self, S.ep_start, now);
    }
    Py_DECREF(now);
    /* Pending lists at their bound get written out (rarely: every few thousand steps). */
    for (int i = 0; i < count; i++) {
        if (writes[i].cols != NULL && PyList_GET_SIZE(writes[i].list) >= S.max_pending) {
            PyObject *result = PyObject_CallMethodNoArgs(writes[i].cols, str_flush);
            if (result == NULL) {
                writes_clear(writes, count);
                return NULL;
            }
            Py_DECREF(result);
        }
    }
    writes_clear(writes, count);
    Py_RETURN_NONE;

fallback:
    if (planned < 0) {
        PyErr_Clear(); /* the Python path meets the same value and reports it properly */
    }
    writes_clear(writes, count);
slow:
    return call_slow(self, args, nargs, kwnames);
error:
    writes_clear(writes, count);
    return NULL;
}

static PyMethodDef add_env_step_def = {
    "add_env_step",
    (PyCFunction)(void (*)(void))add_env_step,
    METH_FASTCALL | METH_KEYWORDS,
    NULL, /* set by bind() from the Python implementation's docstring */
};

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
    PyObject *method = PyDescr_NewMethod(episode_type, &add_env_step_def);
    if (method == NULL) {
        PyMem_RawFree(doc_copy);
        return NULL;
    }
    char *old_doc = (char *)add_env_step_def.ml_doc;
    add_env_step_def.ml_doc = doc_copy;
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

/* ---------------------------------------------------------------------------------- BoxCheck */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    char format;       /* struct-module code of the space's dtype */
    Py_ssize_t ndim;
    Py_ssize_t shape[8];
    Py_ssize_t size;
    int uniform;       /* one bound pair for every element */
    double *low, *high;
    PyObject *fallback; /* the Python checker, for every input this does not read itself */
} BoxCheck;

static void
boxcheck_dealloc(BoxCheck *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->fallback);
    PyMem_Free(self->low);
    PyMem_Free(self->high);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
boxcheck_traverse(BoxCheck *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    return 0;
}

static inline int
read_element(const char *data, char format, double *out)
{
#define READ_AS(ctype)              \
    do {                            \
        ctype value_;               \
        memcpy(&value_, data, sizeof value_); \
        *out = (double)value_;      \
        return 1;                   \
    } while (0)
    switch (format) {
    case 'f': READ_AS(float);
    case 'd': READ_AS(double);
    case 'b': READ_AS(signed char);
    case 'B': READ_AS(unsigned char);
    case 'h': READ_AS(short);
    case 'H': READ_AS(unsigned short);
    case 'i': READ_AS(int);
    case 'I': READ_AS(unsigned int);
    default: return 0; /* 64-bit integers do not fit a double exactly: Python decides */
    }
#undef READ_AS
}

static PyObject *
boxcheck_call(BoxCheck *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a checker takes exactly one item");
        return NULL;
    }
    PyObject *item = args[0];
    if (!S.ndarray_type || !Py_IS_TYPE(item, S.ndarray_type)) {
        return PyObject_CallOneArg(self->fallback, item);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(item, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return PyObject_CallOneArg(self->fallback, item);
    }
    int simple = view.format != NULL && view.format[0] == self->format && view.format[1] == '\0' &&
                 view.ndim == self->ndim;
    for (Py_ssize_t d = 0; simple && d < view.ndim; d++) {
        simple = view.shape[d] == self->shape[d];
    }
    if (!simple) {
        PyBuffer_Release(&view);
        return PyObject_CallOneArg(self->fallback, item);
    }
    const char *data = view.buf;
    Py_ssize_t step = view.itemsize;
    int inside = 1;
    for (Py_ssize_t i = 0; i < self->size; i++) {
        double value = 0.0;
        read_element(data + i * step, self->format, &value);
        Py_ssize_t b = self->uniform ? 0 : i;
        /* Written so that NaN fails, as in gymnasium. */
        if (!(self->low[b] <= value && value <= self->high[b])) {
            inside = 0;
            break;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(inside);
}

static PyObject *
boxcheck_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"format", "shape", "low", "high", "fallback", NULL};
    const char *format;
    PyObject *shape, *low, *high, *fallback;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO!O!O!O:BoxCheck", names, &format,
                                     &PyTuple_Type, &shape, &PyTuple_Type, &low, &PyTuple_Type,
                                     &high, &fallback)) {
        return NULL;
    }
    double probe;
    char zero[8] = {0};
    if (strlen(format) != 1 || !read_element(zero, format[0], &probe)) {
        PyErr_Format(PyExc_ValueError, "unsupported element format '%s'", format);
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape), size = 1;
    if (ndim < 1 || ndim > 8) {
        PyErr_SetString(PyExc_ValueError, "shape must have 1 to 8 dimensions");
        return NULL;
    }
    Py_ssize_t dims[8];
    for (Py_ssize_t d = 0; d < ndim; d++) {
        dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (dims[d] < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "negative dimension");
            }
            return NULL;
        }
        size *= dims[d];
    }
    Py_ssize_t nbounds = PyTuple_GET_SIZE(low);
    if (PyTuple_GET_SIZE(high) != nbounds || (nbounds != 1 && nbounds != size)) {
        PyErr_SetString(PyExc_ValueError, "low and high need one bound or one per element");
        return NULL;
    }
    BoxCheck *self = (BoxCheck *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = (vectorcallfunc)boxcheck_call;
    self->format = format[0];
    self->ndim = ndim;
    memcpy(self->shape, dims, sizeof(dims));
    self->size = size;
    self->uniform = nbounds == 1;
    self->low = PyMem_Malloc((nbounds ? nbounds : 1) * sizeof(double));
    self->high = PyMem_Malloc((nbounds ? nbounds : 1) * sizeof(double));
    self->fallback = Py_NewRef(fallback);
    if (self->low == NULL || self->high == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nbounds; i++) {
        self->low[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(low, i));
        self->high[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(high, i));
    }
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyTypeObject BoxCheckType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "episodes._speedups.BoxCheck",
    .tp_basicsize = sizeof(BoxCheck),
    .tp_dealloc = (destructor)boxcheck_dealloc,
    .tp_vectorcall_offset = offsetof(BoxCheck, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "BoxCheck(format, shape, low, high, fallback): item -> bool for a small Box.",
    .tp_traverse = (traverseproc)boxcheck_traverse,
    .tp_new = boxcheck_new,
};

/* --------------------------------------------------------------------------------- join_rows */

static PyObject *
join_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "join_rows(items: list, out: writable array)");
        return NULL;
    }
    PyObject *items = args[0], *out = args[1];
    Py_ssize_t n = PyList_GET_SIZE(items);
    Py_buffer target;
    if (PyObject_GetBuffer(out, &target, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    /* Plain numbers only: object arrays hold references that a byte copy must not duplicate. */
    if (n == 0 || target.len % n != 0 || target.format == NULL || strlen(target.format) != 1 ||
        strchr("?bBhHiIlLqQefdg", target.format[0]) == NULL) {
        PyBuffer_Release(&target);
        Py_RETURN_FALSE;
    }
    Py_ssize_t row_bytes = target.len / n;
    char *dest = target.buf;
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *row = PyList_GET_ITEM(items, i);
        Py_buffer view;
        if (!Py_IS_TYPE(row, S.ndarray_type) ||
            PyObject_GetBuffer(row, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        /* Same element code, same shape as out's rows: the bytes are the values. */
        ok = view.len == row_bytes && view.format != NULL && strcmp(view.format, target.format) == 0 &&
             view.ndim == target.ndim - 1;
        for (int d = 0; ok && d < view.ndim; d++) {
            ok = view.shape[d] == target.shape[d + 1];
        }
        if (ok) {
            memcpy(dest + i * row_bytes, view.buf, row_bytes);
        }
        PyBuffer_Release(&view);
    }
    PyBuffer_Release(&target);
    return PyBool_FromLong(ok);
}

/* ----------------------------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_VARARGS | METH_KEYWORDS,
     "bind(...) -> method descriptor: the C add_env_step for the given episode class."},
    {"join_rows", (PyCFunction)(void (*)(void))join_rows, METH_FASTCALL,
     "join_rows(items, out) -> bool: copy equal rows into out, False if they do not match."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups", "Optional C fast paths of episodes.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&BoxCheckType) < 0) {
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
    if (PyModule_AddObjectRef(module, "BoxCheck", (PyObject *)&BoxCheckType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
