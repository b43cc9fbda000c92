/* add_env_step in C: plan every column write, run the space checks, then commit. */
#include "speedups.h"

#define MAX_EXTRAS 16
#define MAX_COLUMNS (MAX_EXTRAS + 3)


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

PyMethodDef episodes_add_env_step_def = {
    "add_env_step",
    (PyCFunction)(void (*)(void))add_env_step,
    METH_FASTCALL | METH_KEYWORDS,
    NULL, /* set by bind() from the Python implementation's docstring */
};

