//! Python bindings of the sink's encoder and partitioner (see `encode.rs`, `partition.rs`).
//!
//! Columns arrive as pyarrow buffers (anything with the buffer protocol), read in place:
//!   var column   (validity | None, offsets | None, data | None, offset, length, large_offsets)
//!   fixed column (validity | None, values, offset, length)      i32 partition, i64 timestamp (ms)
//!   headers      (list validity | None, list offsets, list offset, length, key var column, value var column)
//! `partition_rows` returns each partition's row indices as a `Buffer` of little-endian u32 that
//! `encode_batches` takes back as `rows`. The GIL is released while encoding.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;

use crate::arrow_view::{EncodeError as ViewError, HeadersView, I32View, VarView};
use crate::encode::{encode, BatchSpec, Columns};
use crate::partition::{assign, murmur2 as murmur2_hash, Sticky};
use crate::python::{buf, Buffer};

create_exception!(pylog_native, EncodeError, PyValueError, "Arrow data cannot be encoded as record batches.");

fn py_err(e: ViewError) -> PyErr {
    EncodeError::new_err(e.0)
}

fn held(obj: Option<Bound<'_, PyAny>>) -> PyResult<Option<PyUntypedBuffer>> {
    let Some(o) = obj else { return Ok(None) };
    let b = PyUntypedBuffer::get(&o)?;
    if !b.is_c_contiguous() {
        return Err(PyBufferError::new_err("the sink's encoder needs contiguous buffers"));
    }
    Ok(Some(b))
}

fn bytes(b: &Option<PyUntypedBuffer>) -> &[u8] {
    match b {
        // SAFETY: contiguous (checked in `held`); the PyUntypedBuffer keeps the exporter alive and its
        // view locked while the slice is used; only read.
        Some(b) if b.len_bytes() > 0 => unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) },
        _ => &[],
    }
}

type VarTuple<'py> = (Option<Bound<'py, PyAny>>, Option<Bound<'py, PyAny>>, Option<Bound<'py, PyAny>>, usize, usize, bool);
type FixedTuple<'py> = (Option<Bound<'py, PyAny>>, Bound<'py, PyAny>, usize, usize);
type HeadersTuple<'py> = (Option<Bound<'py, PyAny>>, Bound<'py, PyAny>, usize, usize, VarTuple<'py>, VarTuple<'py>);

struct VarBufs {
    validity: Option<PyUntypedBuffer>,
    offsets: Option<PyUntypedBuffer>,
    data: Option<PyUntypedBuffer>,
    offset: usize,
    len: usize,
    large: bool,
}

impl VarBufs {
    fn new(t: VarTuple<'_>) -> PyResult<Self> {
        Ok(VarBufs { validity: held(t.0)?, offsets: held(t.1)?, data: held(t.2)?, offset: t.3, len: t.4, large: t.5 })
    }

    fn view(&self, name: &str) -> PyResult<VarView<'_>> {
        VarView::new(name, self.validity.as_ref().map(|_| bytes(&self.validity)), bytes(&self.offsets),
                     bytes(&self.data), self.offset, self.len, self.large).map_err(py_err)
    }
}

struct FixedBufs {
    validity: Option<PyUntypedBuffer>,
    values: Option<PyUntypedBuffer>,
    offset: usize,
    len: usize,
}

impl FixedBufs {
    fn new(t: FixedTuple<'_>) -> PyResult<Self> {
        Ok(FixedBufs { validity: held(t.0)?, values: held(Some(t.1))?, offset: t.2, len: t.3 })
    }

    fn view<const W: usize>(&self, name: &str) -> PyResult<crate::arrow_view::FixedView<'_, W>> {
        crate::arrow_view::FixedView::new(name, self.validity.as_ref().map(|_| bytes(&self.validity)),
                                          bytes(&self.values), self.offset, self.len).map_err(py_err)
    }
}

struct HeaderBufs {
    lists: FixedBufs,
    keys: VarBufs,
    values: VarBufs,
}

impl HeaderBufs {
    fn view(&self) -> PyResult<HeadersView<'_>> {
        Ok(HeadersView { lists: self.lists.view::<4>("headers")?, keys: self.keys.view("header keys")?,
                         values: self.values.view("header values")? })
    }
}

/// (partition, rows Buffer, row count) of every partition that got rows; the sticky state after.
#[pyfunction]
#[pyo3(signature = (value, key, partition, num_partitions, sticky_partition, sticky_bytes, switch_bytes))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn partition_rows<'py>(py: Python<'py>, value: VarTuple<'py>, key: Option<VarTuple<'py>>,
                       partition: Option<FixedTuple<'py>>, num_partitions: i32, sticky_partition: i32,
                       sticky_bytes: usize, switch_bytes: usize)
                       -> PyResult<(Vec<(i32, Py<Buffer>, usize)>, i32, usize)> {
    let value = VarBufs::new(value)?;
    let key = key.map(VarBufs::new).transpose()?;
    let partition = partition.map(FixedBufs::new).transpose()?;
    let (vv, kv) = (value.view("value")?, key.as_ref().map(|k| k.view("key")).transpose()?);
    let pv: Option<I32View<'_>> = partition.as_ref().map(|p| p.view::<4>("partition")).transpose()?;
    let mut sticky = Sticky { partition: sticky_partition, bytes: sticky_bytes };
    let groups = py.detach(|| assign(&vv, kv.as_ref(), pv.as_ref(), num_partitions, &mut sticky, switch_bytes))
        .map_err(py_err)?;
    let mut out = Vec::new();
    for (p, rows) in groups.into_iter().enumerate() {
        if !rows.is_empty() {
            let n = rows.len();
            let raw: Vec<u8> = rows.iter().flat_map(|r| r.to_le_bytes()).collect();
            out.push((p as i32, buf(py, raw)?, n));
        }
    }
    Ok((out, sticky.partition, sticky.bytes))
}

/// Record batches of the given rows: [(batch Buffer, record count)], in order.
#[pyfunction]
#[pyo3(signature = (value, key=None, headers=None, timestamp=None, rows=None, codec=0, level=None,
                    max_batch_bytes=1_000_000, now_ms=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                    transactional=false))]
#[allow(clippy::too_many_arguments)]
fn encode_batches<'py>(py: Python<'py>, value: VarTuple<'py>, key: Option<VarTuple<'py>>,
                       headers: Option<HeadersTuple<'py>>, timestamp: Option<FixedTuple<'py>>,
                       rows: Option<Bound<'py, PyAny>>, codec: u8, level: Option<i32>, max_batch_bytes: usize,
                       now_ms: i64, producer_id: i64, producer_epoch: i16, base_sequence: i32,
                       transactional: bool) -> PyResult<Vec<(Py<Buffer>, usize)>> {
    let value = VarBufs::new(value)?;
    let key = key.map(VarBufs::new).transpose()?;
    let headers = match headers {
        None => None,
        Some(h) => Some(HeaderBufs { lists: FixedBufs::new((h.0, h.1, h.2, h.3))?, keys: VarBufs::new(h.4)?,
                                     values: VarBufs::new(h.5)? }),
    };
    let timestamp = timestamp.map(FixedBufs::new).transpose()?;
    let rows_buf = held(rows)?;
    let rows: Option<Vec<u32>> = rows_buf.as_ref().map(|_| {
        bytes(&rows_buf).chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    });
    let cols = Columns {
        value: value.view("value")?,
        key: key.as_ref().map(|k| k.view("key")).transpose()?,
        headers: headers.as_ref().map(|h| h.view()).transpose()?,
        timestamp: timestamp.as_ref().map(|t| t.view::<8>("timestamp")).transpose()?,
    };
    let spec = BatchSpec { codec, level, max_batch_bytes, now_ms, producer_id, producer_epoch, base_sequence,
                           transactional };
    let batches = py.detach(|| encode(&cols, rows.as_deref(), &spec)).map_err(py_err)?;
    batches.into_iter().map(|b| Ok((buf(py, b.data)?, b.records))).collect()
}

/// Kafka's murmur2 of `data` (the default partitioner's hash).
#[pyfunction]
fn murmur2(data: &[u8]) -> i32 {
    murmur2_hash(data)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(partition_rows, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add("EncodeError", m.py().get_type::<EncodeError>())?;
    Ok(())
}
