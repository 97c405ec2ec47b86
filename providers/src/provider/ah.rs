//! Address handles: the kernel `CREATE_AH` (it resolves the RoCE
//! destination MAC) and what each provider keeps to address UD sends.

use std::sync::Arc;

use rverbs_uapi::ib_user_verbs::ib_uverbs_ah_attr;
use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use super::{AhOps, AhProv, Kind, ProviderContext, Variant};
use crate::cmd::ah as cmd;
use crate::sys::UverbsFd;
use crate::{Error, Result};

const VERB: &str = "ibv_create_ah";

/// What an AH is created with.
#[derive(Clone, Copy, Debug)]
pub struct AhCreate {
    /// The PD's kernel handle.
    pub pd_handle: u32,
    /// The address (`struct ibv_ah_attr` in the kernel's layout; checked by
    /// the caller: port, GID index, GRH on RoCE).
    pub attr: ib_uverbs_ah_attr,
    /// rxe: carry the address vector in every UD work request, as on
    /// kernels before 5.16 (which give no AH numbers), even when the kernel
    /// gave a number. Other providers ignore it.
    pub legacy_av: bool,
    /// The source GID's type (`IB_UVERBS_GID_TYPE_*`) when the caller has
    /// read it (sysfs on kernels without `QUERY_GID_ENTRY`); `None`: the
    /// provider asks the kernel.
    pub sgid_type: Option<u32>,
    /// Whether the port is Ethernet (RoCE), when the caller knows it
    /// (rverbs caches the port's link layer); `None`: QUERY_PORT.
    pub ethernet: Option<bool>,
}

/// A kernel AH and the provider's address data: the number UD work
/// requests name it by (the rxe kernel's, or a provider's own for an
/// address vector kept in userspace: rxe before 5.16, mlx5 always).
/// Dropping it destroys the kernel AH and forgets the number; WQEs already
/// posted carry their own copy of the address.
#[derive(Debug)]
pub struct KernelAh {
    fd: Arc<UverbsFd>,
    handle: u32,
    ah_num: u32,
    prov: AhProv,
    live: bool,
}

impl ProviderContext {
    /// Creates an address handle: `IB_USER_VERBS_CMD_CREATE_AH` through
    /// `INVOKE_WRITE` (`ibv_create_ah`), then the provider's address data
    /// (rxe: the kernel's AH number, or an `rxe_av` rverbs builds; mlx5: an
    /// address vector with the MAC the kernel resolved). A route failure
    /// keeps the kernel's errno (`ETIMEDOUT`, `ENETUNREACH`,
    /// `EHOSTUNREACH`, `ENODATA`) with [`ErrorKind::Os`](crate::ErrorKind::Os).
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, fd: &Arc<UverbsFd>, a: &AhCreate) -> Result<KernelAh> {
        each!(&self.kind, Kind, T, ctx => create_ah::<T>(ctx, fd, a))
    }
}

/// [`ProviderContext::create_ah`] of provider `T`.
fn create_ah<T: AhOps>(ctx: &T, fd: &Arc<UverbsFd>, a: &AhCreate) -> Result<KernelAh>
where
    AhProv: Variant<T, Of = T::Ah>,
{
    let mut resp = T::AhResp::new_zeroed();
    let handle = cmd::create_ah(fd, a.pd_handle, &a.attr, 0, resp.as_mut_bytes()).map_err(|e| Error::os(VERB, e))?;
    // On failure from here, dropping `ah` destroys the kernel AH.
    let mut ah = KernelAh { fd: fd.clone(), handle, ah_num: 0, prov: AhProv::KernelOnly, live: true };
    let (prov, ah_num) = ctx.ah_finish(fd, a, &resp)?;
    ah.ah_num = ah_num;
    ah.prov = Variant::<T>::wrap(prov);
    debug!(handle, ah_num, "AH created");
    Ok(ah)
}

impl KernelAh {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The number UD work requests name this AH by.
    pub fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// Destroys the kernel AH now (`UVERBS_METHOD_AH_DESTROY`,
    /// `ibv_destroy_ah`); a second call does nothing. If the kernel
    /// refuses, the AH stays live (a later call tries again).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::destroy_ah(&self.fd, self.handle).inspect_err(|_| self.live = true)?;
        debug!(handle = self.handle, "AH destroyed");
        Ok(())
    }
}

impl Drop for KernelAh {
    /// Inlined into the drop glue: after an explicit destroy it is one
    /// load and a branch, no call.
    #[inline]
    fn drop(&mut self) {
        if self.live {
            self.destroy_on_drop();
        }
    }
}

impl KernelAh {
    /// [`Drop`]'s destroy of an AH still live.
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "AH destroy failed");
        }
    }
}
