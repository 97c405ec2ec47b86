//! Address handles (`ibv_ah`): where a UD send goes.

use rverbs_providers::provider::{AhCreate, KernelAh};
use rverbs_providers::{Errno, Error, Result};

use crate::address::{check_av, check_av_with};
use crate::{AhAttr, ProtectionDomain, UdDest};

/// An address handle for UD sends. The kernel resolved the destination MAC
/// when it was created (RoCE); the provider keeps what the kernel answered
/// (rxe: the AH number its work requests carry; mlx5: the destination MAC,
/// which goes into an address vector the provider keeps under its own AH
/// number). On rxe kernels before 5.16, which give no AH number, rverbs
/// builds rxe's address vector itself and copies it into every UD request.
///
/// ```no_run
/// use rverbs::{AhAttr, GlobalRoute};
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let sgid_index = ctx.default_sgid_index(1)?;
/// let dgid = ctx.query_gid(1, sgid_index.into())?.unwrap().gid;   // loopback
/// let ah = pd.create_ah(&AhAttr {
///     port_num: 1,
///     grh: Some(GlobalRoute { dgid, sgid_index, hop_limit: 64, ..Default::default() }),
///     ..Default::default()
/// })?;
/// let dest = ah.ud_dest(0x123, 0x1111_1111);   // borrows `ah`: cannot outlive it
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct AddressHandle {
    pd: ProtectionDomain,
    attr: AhAttr,
    pub(crate) kernel: KernelAh,
}

impl ProtectionDomain {
    /// Creates an address handle (`IB_USER_VERBS_CMD_CREATE_AH` through
    /// `INVOKE_WRITE`, `ibv_create_ah`).
    ///
    /// # Errors
    /// A GID index that does not exist, a RoCE address without GRH, a
    /// destination the kernel cannot resolve ("cannot reach GID ...").
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        self.create_ah_inner(attr, false)
    }

    /// Creates an address handle whose address vector travels in every UD
    /// work request, as rverbs does on rxe kernels before 5.16, which give
    /// no AH numbers: this makes that path testable on newer kernels (the
    /// kernel reads the vector whenever a request's AH number is 0). The
    /// kernel AH is created all the same. Other providers: [`create_ah`](Self::create_ah).
    ///
    /// # Errors
    /// As [`create_ah`](Self::create_ah); an address without a GRH.
    pub fn create_ah_legacy_av(&self, attr: &AhAttr) -> Result<AddressHandle> {
        self.create_ah_inner(attr, true)
    }

    fn create_ah_inner(&self, attr: &AhAttr, legacy_av: bool) -> Result<AddressHandle> {
        const VERB: &str = "ibv_create_ah";
        let ctx = self.context();
        let _span = verb_span!("ibv_create_ah");
        let provider = ctx.provider_ctx(VERB, "address handles")?;
        // The source GID's entry (one syscall) only for a provider that
        // uses its type; the kernel refuses an index without a GID anyway.
        let gid_type = ctx.provider().is_some_and(|p| p.ah_needs_gid_type());
        let port = check_av_with(ctx, attr, attr.port_num, VERB, gid_type)?;
        let args = AhCreate {
            pd_handle: self.handle(),
            attr: attr.to_kernel_ah_attr(),
            legacy_av,
            sgid_type: port.sgid_type,
            ethernet: port.ethernet,
        };
        let kernel = provider.create_ah(ctx.fd_arc(), &args).map_err(|e| {
            // An index without a GID: say so, as check_av does.
            match check_av(ctx, attr, attr.port_num, VERB) {
                Err(why) => why,
                Ok(_) => route_error(e, attr),
            }
        })?;
        Ok(AddressHandle { pd: self.clone(), attr: *attr, kernel })
    }
}

/// A kernel refusal to resolve the destination, said with the GIDs involved.
fn route_error(e: Error, attr: &AhAttr) -> Error {
    let route = matches!(e.errno(), Some(Errno::ETIMEDOUT | Errno::ENETUNREACH | Errno::EHOSTUNREACH | Errno::ENODATA));
    match attr.grh {
        Some(g) if e.is_os() && route => {
            e.with_message(format!("cannot reach GID {} from sgid index {}", g.dgid, g.sgid_index))
        }
        _ => e,
    }
}

impl AddressHandle {
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }
    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.kernel.handle()
    }
    /// The address it was created with.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
    /// The AH number UD work requests name it by: the rxe kernel's, or
    /// rverbs' own for an address vector kept in userspace (rxe before 5.16,
    /// [`create_ah_legacy_av`](ProtectionDomain::create_ah_legacy_av), mlx5).
    pub fn ah_num(&self) -> u32 {
        self.kernel.ah_num()
    }

    /// The destination of a UD send through this AH to QP `remote_qpn`
    /// with Q_Key `remote_qkey`. It borrows the AH, so it cannot be posted
    /// after the AH is gone (when its number may name another AH).
    pub fn ud_dest(&self, remote_qpn: u32, remote_qkey: u32) -> UdDest<'_> {
        UdDest::borrowing(self, self.kernel.ah_num(), remote_qpn, remote_qkey)
    }

    /// Destroys the AH now (`UVERBS_METHOD_AH_DESTROY`, `ibv_destroy_ah`).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(mut self) -> Result<()> {
        self.kernel.destroy()
    }
}
