// An SGE borrows its memory region: it cannot be posted after the region
// (and with it the registration its lkey names) is gone.
use rverbs::{AccessFlags, QpInitAttr, QpType, SendWr};

fn main() -> rverbs::Result<()> {
    let ctx = rverbs::devices()?[0].open()?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let sge = {
        let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
        mr.sge(0, 64)?
    };
    qp.post_send(&[SendWr::send(1, &[sge])]).ok();
    Ok(())
}
