/* Shared declarations of the optional C accelerator (episodes._speedups).
 *
 * Every entry point handles only the common, fully checked case and hands everything else,
 * unchanged, to the pure-Python code it mirrors, which stays the definition of the behaviour
 * and is what the tests compare against. One file per fast path:
 *
 *   module.c     the module, and bind(): slot offsets and collaborators for step.c
 *   step.c       add_env_step as a method of SingleAgentEpisode (list and numpy mode)
 *   box_check.c  BoxCheck, a small Box membership check reading the array's buffer
 *   join_rows.c  join_rows(items, out): equal-shaped plain rows copied into one array
 */
#ifndef EPISODES_SPEEDUPS_H
#define EPISODES_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

/* Slot offsets and collaborators, set by bind(). The episode and buffer classes use
 * __slots__; their member descriptors give the offsets, and every fast path first checks the
 * exact class, so an offset is only ever used on an object laid out the way it was measured. */
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

extern State S;
extern PyObject *one;
extern PyObject *str_dtype, *str_shape, *str_tobytes, *str_flush, *str_infos, *str_terminated,
    *str_truncated, *str_extra_model_outputs;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

static inline void
slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    Py_INCREF(value);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

extern PyMethodDef episodes_add_env_step_def;
extern PyTypeObject episodes_BoxCheckType;
PyObject *episodes_join_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
