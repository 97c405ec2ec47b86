//! From a CM id's device (QUERY's node GUID and device index) to an rverbs
//! [`Context`] (`shared/reference/rdmacm.md` §A.6). librdmacm opens every
//! device at start; rverbs opens the one an id needs, on first use, and
//! shares it: a process-wide table of weak handles, so a device is open
//! while something of it lives and is not kept open by the table.

use std::sync::Mutex;

use rverbs_providers::sys::netlink::RdmaNetlink;
use rverbs_providers::{Errno, Error, Result};

use super::id::{CmId, DevInfo};
use crate::context::WeakContext;
use crate::{Context, Device};

/// `(device index, node GUID, context)` of the devices CM ids mapped.
static OPEN: Mutex<Vec<(u32, crate::Guid, WeakContext)>> = Mutex::new(Vec::new());

/// The name RDMA netlink gives device `index`, when netlink answers.
fn name_of_index(index: u32) -> Option<String> {
    let mut nl = RdmaNetlink::open().ok()?;
    nl.devices().ok()?.into_iter().find(|d| d.index == index).map(|d| d.name)
}

/// The uverbs device with the id's node GUID (and, where several share it,
/// the device index's name).
fn find_device(dev: &DevInfo) -> Result<Device> {
    let mut all: Vec<Device> = crate::devices()?.into_iter().filter(|d| d.node_guid() == dev.node_guid).collect();
    if all.len() > 1 {
        if let Some(name) = name_of_index(dev.ibdev_index) {
            all.retain(|d| d.name() == name);
        }
    }
    all.into_iter().next().ok_or_else(|| {
        Error::check("rdma_cm_id.verbs", Errno::ENODEV).with_message(format!(
            "no uverbs device has node GUID {} (the CM's device index {}): is its uverbs node missing?",
            dev.node_guid, dev.ibdev_index
        ))
    })
}

fn no_device() -> Error {
    Error::check("rdma_cm_id.verbs", Errno::ENODEV).with_message(
        "the CM id has no device yet: bind it to a specific address, or wait for ADDR_RESOLVED \
         (a connect request's id has one)",
    )
}

/// The context of `id`'s device, opened on first use.
pub(crate) fn context_of(id: &CmId) -> Result<Context> {
    let dev = {
        let st = id.state();
        if let Some(c) = &st.context {
            return Ok(c.clone());
        }
        st.dev.ok_or_else(no_device)?
    };
    let ctx = shared_context(&dev)?;
    id.state().context = Some(ctx.clone());
    Ok(ctx)
}

fn shared_context(dev: &DevInfo) -> Result<Context> {
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    open.retain(|(_, _, w)| w.upgrade().is_some());
    if let Some(c) =
        open.iter().find(|(i, g, _)| *i == dev.ibdev_index && *g == dev.node_guid).and_then(|(_, _, w)| w.upgrade())
    {
        return Ok(c);
    }
    // Opening under the lock: two ids of one device get one context.
    let ctx = find_device(dev)?.open()?;
    tracing::debug!(device = ctx.device().name(), index = dev.ibdev_index, "CM: opened the id's device");
    open.push((dev.ibdev_index, dev.node_guid, ctx.downgrade()));
    Ok(ctx)
}

/// The transport of the id's device, from sysfs (no context opened);
/// InfiniBand's when no uverbs device matches.
pub(crate) fn transport_of(dev: &DevInfo) -> crate::Transport {
    find_device(dev).map_or(crate::Transport::Ib, |d| d.transport())
}

/// Whether `ctx` is on the id's device.
pub(crate) fn same_device(id: &CmId, ctx: &Context) -> Result<bool> {
    let dev = {
        let st = id.state();
        if st.context.as_ref().is_some_and(|c| c.same_as(ctx)) {
            return Ok(true);
        }
        st.dev.ok_or_else(no_device)?
    };
    if ctx.device().node_guid() != dev.node_guid {
        return Ok(false);
    }
    Ok(name_of_index(dev.ibdev_index).map_or(true, |n| n == ctx.device().name()))
}
