// A work request borrows its SGE list: the list cannot be dropped while the
// request that names it is still to be posted.
use rverbs::{AccessFlags, QpInitAttr, QpType, SendWr};

fn main() -> rverbs::Result<()> {
    let ctx = rverbs::devices()?[0].open()?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let wr = {
        let sgl = vec![mr.sge(0, 64)?];
        SendWr::send(1, &sgl)
    };
    qp.post_send(&[wr]).ok();
    Ok(())
}
