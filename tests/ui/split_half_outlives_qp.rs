// The borrowed halves of `QueuePair::split` cannot outlive their QP
// (`into_split` gives owned ones instead).
use rverbs::{QpInitAttr, QpType, SendQueue};

fn main() -> rverbs::Result<()> {
    let ctx = rverbs::devices()?[0].open()?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16)?;
    let sq: &mut SendQueue = {
        let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
        let (sq, _rq) = qp.split();
        sq
    };
    sq.post_send(&[]).ok();
    Ok(())
}
